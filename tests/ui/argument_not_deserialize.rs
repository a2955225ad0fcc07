use toolgate::prelude::*;

struct OrderId(String);

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: OrderId) -> Result<String, ToolError> {
    Ok(order_id.0)
}

fn main() {}
