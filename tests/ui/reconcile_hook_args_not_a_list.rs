use toolgate::prelude::*;

/// Asks the provider for the refund under the key.
async fn find_refund(key: &IdempotencyKey) -> Result<Option<String>, ToolError> {
    Ok(Some(key.to_string()))
}

/// Refund an order.
#[tool(side_effect = "write", reconcile = find_refund("key"))]
async fn refund(key: &IdempotencyKey, order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id} {key}"))
}

fn main() {}
