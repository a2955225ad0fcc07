use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> String {
    order_id
}

fn main() {}
