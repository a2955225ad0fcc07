use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: impl Into<String>) -> Result<String, ToolError> {
    Ok(order_id.into())
}

fn main() {}
