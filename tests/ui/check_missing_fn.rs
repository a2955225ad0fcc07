use toolgate::prelude::*;

/// Refund part or all of a paid order.
#[tool(side_effect = "write", check = within_balance(order_id, amount))]
async fn issue_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
