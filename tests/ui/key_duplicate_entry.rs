use toolgate::prelude::*;

/// Cancel an order that has not shipped.
#[tool(side_effect = "write", key = [order_id, order_id])]
async fn cancel_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
