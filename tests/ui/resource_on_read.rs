use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(resource = order_id)]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
