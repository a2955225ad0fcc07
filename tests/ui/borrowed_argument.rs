use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: &str) -> Result<String, ToolError> {
    Ok(order_id.to_owned())
}

fn main() {}
