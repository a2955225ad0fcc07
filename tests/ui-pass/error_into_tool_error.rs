//! A tool may return `Result<T, E>` for any `E: Into<ToolError>`; the model reads the converted
//! error.

use serde::Serialize;
use serde_json::json;
use toolgate::prelude::*;

#[derive(Debug)]
enum LookupError {
    Missing(String),
}

impl From<LookupError> for ToolError {
    fn from(err: LookupError) -> Self {
        match err {
            LookupError::Missing(id) => ToolError::not_found(format!("no order {id}"))
                .with_next("ask the customer for the order id"),
        }
    }
}

#[derive(Serialize)]
struct Order {
    id: String,
}

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<Order, LookupError> {
    if order_id.starts_with("ORD-") {
        Ok(Order { id: order_id })
    } else {
        Err(LookupError::Missing(order_id))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![
        ToolCall::new("1", "get_order", json!({"order_id": "ORD-1"})),
        ToolCall::new("2", "get_order", json!({"order_id": "x"})),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(reports[0].result.to_json()["data"], json!({"id": "ORD-1"}));
    let error = &reports[1].result.to_json()["error"];
    assert_eq!(error["kind"], "not_found");
    assert_eq!(error["what"], "no order x");
}
