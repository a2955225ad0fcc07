use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order<T: ToString>(order_id: T) -> Result<String, ToolError> {
    Ok(order_id.to_string())
}

fn main() {}
