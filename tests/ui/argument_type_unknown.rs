use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: OrderIdd) -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
