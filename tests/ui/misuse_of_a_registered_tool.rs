use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(timeout = "2 seconds")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let _ = get_order::descriptor();
}
