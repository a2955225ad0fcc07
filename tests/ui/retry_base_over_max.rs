use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(retry(base = "10s", max = "1s"))]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
