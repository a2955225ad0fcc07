//! `Option`, `Vec` and nested struct arguments: an `Option` is not required, a nested struct is
//! described in the schema, and all of them deserialize.

use serde::Deserialize;
use serde_json::json;
use toolgate::prelude::*;

/// A postal address.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Address {
    /// The street and number.
    street: String,
    /// The city.
    city: String,
}

/// Ship the given lines of an order.
#[tool(side_effect = "write")]
async fn ship_order(
    /// The order.
    order_id: String,
    /// The lines to ship.
    lines: Vec<u32>,
    /// Where to ship them, if not the order's address.
    address: Option<Address>,
    /// Labels, by carrier.
    labels: Option<Vec<Option<String>>>,
) -> Result<String, ToolError> {
    Ok(format!(
        "{order_id} {lines:?} {:?} {labels:?}",
        address.map(|a| (a.street, a.city))
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let schema = ship_order::args_schema();
    assert_eq!(schema["required"], json!(["order_id", "lines"]));
    assert_eq!(schema["properties"]["lines"]["type"], "array");

    let mut registry = Registry::new();
    registry.register::<ship_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![
        ToolCall::new(
            "1",
            "ship_order",
            json!({"order_id": "O-1", "lines": [1, 2]}),
        ),
        ToolCall::new(
            "2",
            "ship_order",
            json!({"order_id": "O-2", "lines": [], "address": {"street": "1 Main St", "city": "Oslo"}, "labels": ["dhl", null]}),
        ),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(reports[0].result.to_json()["data"], "O-1 [1, 2] None None");
    assert_eq!(
        reports[1].result.to_json()["data"],
        r#"O-2 [] Some(("1 Main St", "Oslo")) Some([Some("dhl"), None])"#
    );
}
