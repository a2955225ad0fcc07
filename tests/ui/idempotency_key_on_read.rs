use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(key: &IdempotencyKey, order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id} {key}"))
}

fn main() {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
}
