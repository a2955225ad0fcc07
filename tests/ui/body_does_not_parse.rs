use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    let status = ;
    Ok(format!("{order_id}: {status}"))
}

fn main() {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
}
