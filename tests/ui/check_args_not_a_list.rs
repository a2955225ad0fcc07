use toolgate::prelude::*;

/// Checks the amount against what the order can still refund.
async fn within_balance(amount: f64) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write", check = within_balance("amount"))]
async fn issue_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
