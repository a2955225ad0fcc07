use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(timeout = "30sec")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
