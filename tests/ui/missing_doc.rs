use toolgate::prelude::*;

#[tool]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
