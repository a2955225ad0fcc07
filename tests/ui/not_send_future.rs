use std::rc::Rc;

use toolgate::prelude::*;

async fn audit() {}

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    let id = Rc::new(order_id);
    audit().await;
    Ok(id.to_string())
}

fn main() {}
