use toolgate::prelude::*;

#[derive(Debug)]
struct LookupError;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<String, LookupError> {
    Ok(order_id)
}

fn main() {}
