use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(check = "known_order")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

async fn known_order(order_id: String) -> Result<(), ToolError> {
    let _ = order_id;
    Ok(())
}

fn main() {}
