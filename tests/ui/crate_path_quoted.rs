use toolgate as my_alias;
use toolgate::prelude::{ToolError, tool};

/// Look up an order by its id.
#[tool(crate = "my_alias")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

fn main() {}
