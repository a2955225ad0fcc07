use toolgate::prelude::*;

/// Refund an order at a provider that dedupes by Idempotency-Key.
#[tool(side_effect = "write", honours_key = "yes")]
async fn issue_refund(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
