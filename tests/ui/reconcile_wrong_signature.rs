use toolgate::prelude::*;

/// Asks the shop whether the order was cancelled; it must take the tool's own arguments.
async fn find_cancellation(order_id: u32) -> Result<Option<String>, ToolError> {
    Ok(Some(order_id.to_string()))
}

/// Cancel an order that has not shipped.
#[tool(side_effect = "write", reconcile = find_cancellation)]
async fn cancel_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
