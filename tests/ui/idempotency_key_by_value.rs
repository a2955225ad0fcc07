use toolgate::prelude::*;

/// Refund an order.
#[tool(side_effect = "write")]
async fn refund(key: IdempotencyKey, order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id} {key}"))
}

fn main() {}
