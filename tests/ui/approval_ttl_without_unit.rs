use toolgate::prelude::*;

/// Refund part or all of a paid order.
#[tool(side_effect = "write", approval_over = 5000, approval_ttl = "24")]
async fn issue_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
