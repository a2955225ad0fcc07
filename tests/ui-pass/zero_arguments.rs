//! A tool with no arguments accepts only `{}`.

use serde_json::json;
use toolgate::prelude::*;

/// Report whether the store is open.
#[tool]
async fn store_open() -> Result<bool, ToolError> {
    Ok(true)
}

fn main() {
    let schema = store_open::args_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"], json!({}));
    assert_eq!(schema["additionalProperties"], false);
    assert!(store_open::descriptor().params.is_empty());
}
