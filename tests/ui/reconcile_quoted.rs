use toolgate::prelude::*;

/// Cancel an order that has not shipped.
#[tool(side_effect = "write", reconcile = "find_cancellation")]
async fn cancel_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

async fn find_cancellation() {}

fn main() {}
