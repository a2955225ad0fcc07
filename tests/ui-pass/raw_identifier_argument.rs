//! An argument named with a raw identifier is sent by the model under its plain name.

use serde_json::json;
use toolgate::prelude::*;

/// List the orders of one type.
#[tool]
async fn list_orders(
    /// The order type: `retail` or `wholesale`.
    r#type: String,
) -> Result<String, ToolError> {
    Ok(r#type)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let schema = list_orders::args_schema();
    assert_eq!(schema["required"], json!(["type"]));
    assert_eq!(list_orders::descriptor().params, &["type"]);

    let mut registry = Registry::new();
    registry.register::<list_orders>().unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![ToolCall::new("1", "list_orders", json!({"type": "retail"}))];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(reports[0].result.to_json()["data"], "retail");
}
