use toolgate::prelude::*;

/// Look up an order.
#[tool(honours_key = true)]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
