use toolgate::prelude::*;

struct Order {
    id: String,
}

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<Order, ToolError> {
    Ok(Order { id: order_id })
}

fn main() {}
