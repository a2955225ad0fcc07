//! Plain parameters: each one's doc comment becomes its description in the schema.

use serde_json::{Value, json};
use toolgate::prelude::*;

/// Look up an order by its id.
#[tool(permission = "orders:read", timeout = "2s")]
async fn get_order(
    /// The order id, such as `ORD-1001`.
    order_id: String,
    /// Include the order lines.
    with_lines: bool,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "with_lines": with_lines}))
}

fn main() {
    let schema = get_order::args_schema();
    assert_eq!(
        schema["properties"]["order_id"]["description"],
        "The order id, such as `ORD-1001`."
    );
    assert_eq!(
        schema["properties"]["with_lines"]["description"],
        "Include the order lines."
    );
    assert_eq!(schema["required"], json!(["order_id", "with_lines"]));
    assert_eq!(get_order::descriptor().doc, "Look up an order by its id.");
    assert_eq!(get_order::descriptor().params, &["order_id", "with_lines"]);
}
