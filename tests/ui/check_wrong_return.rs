use toolgate::prelude::*;

/// Says whether the amount is within what the order can still refund, but cannot refuse.
async fn within_balance(amount: f64) -> bool {
    amount <= 500.0
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write", check = within_balance(amount))]
async fn issue_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
