use toolgate::prelude::*;

/// Asks the shop whether the order was cancelled, but cannot say "not applied".
async fn find_cancellation(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

/// Cancel an order that has not shipped.
#[tool(side_effect = "write", reconcile = find_cancellation)]
async fn cancel_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
