use toolgate::prelude::*;

/// Refund part or all of a paid order.
#[tool(side_effect = "write", approval_ttl = "24h")]
async fn issue_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
