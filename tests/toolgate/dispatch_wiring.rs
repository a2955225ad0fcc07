//! Wiring mistakes are refused when the dispatcher is built, not on the first call: a write or
//! destructive tool without a store, a tool taking a `State<T>` the dispatcher was not given.

use std::sync::Arc;

use toolgate::prelude::*;
use toolgate::{dispatch::BuildError, tool::StateType};
use toolgate_test::MemoryStore;

/// The shop a tool reads from.
struct Shop {
    name: &'static str,
}

/// Which shop this is.
#[tool]
async fn shop_name(shop: State<Shop>) -> Result<String, ToolError> {
    Ok(shop.name.to_owned())
}

/// Delete an order.
#[tool(side_effect = "destructive", key = [order_id])]
async fn delete_order(key: &IdempotencyKey, order_id: String) -> Result<String, ToolError> {
    Ok(format!("deleted {order_id} under {key}"))
}

fn registry_of(register: impl FnOnce(&mut Registry)) -> Registry {
    let mut registry = Registry::new();
    register(&mut registry);
    registry
}

#[test]
fn a_state_the_dispatcher_lacks_is_a_build_error_naming_the_tool_and_the_type() {
    let registry = registry_of(|r| {
        r.register::<shop_name>().unwrap();
    });
    let refused = Dispatcher::builder(registry).try_build().unwrap_err();
    let shop = std::any::type_name::<Shop>();
    assert_eq!(
        refused,
        BuildError::MissingState {
            tool: "shop_name",
            state: shop,
        }
    );
    assert_eq!(
        refused.to_string(),
        format!(
            "the tool `shop_name` takes `State<{shop}>`, but the dispatcher holds no `{shop}`: add `DispatcherBuilder::state(value)` with a value of that type"
        )
    );
}

#[test]
fn a_state_of_another_type_does_not_count() {
    let registry = registry_of(|r| {
        r.register::<shop_name>().unwrap();
    });
    let refused = Dispatcher::builder(registry)
        .state(Arc::new(Shop {
            name: "behind an Arc",
        }))
        .try_build()
        .unwrap_err();
    assert!(matches!(
        refused,
        BuildError::MissingState {
            tool: "shop_name",
            ..
        }
    ));
}

#[test]
fn a_destructive_tool_without_a_store_is_a_build_error() {
    let registry = registry_of(|r| {
        r.register::<shop_name>().unwrap();
        r.register::<delete_order>().unwrap();
    });
    let refused = Dispatcher::builder(registry)
        .state(Shop { name: "corner" })
        .try_build()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the tool `delete_order` is a destructive tool and its operations must be recorded, but the dispatcher has no store: add `DispatcherBuilder::store(...)` with a store such as `toolgate::store::SqliteStore` (feature `sqlite`) or `toolgate::store::PostgresStore` (feature `postgres`)"
    );
}

#[test]
#[should_panic(expected = "the tool `shop_name` takes `State<")]
fn build_panics_with_the_same_message() {
    let registry = registry_of(|r| {
        r.register::<shop_name>().unwrap();
    });
    let _ = Dispatcher::builder(registry).build();
}

#[test]
fn the_descriptor_records_the_state_a_tool_takes() {
    let needed: Vec<&str> = shop_name::descriptor()
        .state
        .iter()
        .map(StateType::type_name)
        .collect();
    assert_eq!(needed, [std::any::type_name::<Shop>()]);
    assert!(delete_order::descriptor().state.is_empty());
}

#[tokio::test]
async fn a_wired_dispatcher_injects_the_state_and_the_key() {
    let registry = registry_of(|r| {
        r.register::<shop_name>().unwrap();
        r.register::<delete_order>().unwrap();
    });
    let dispatcher = Dispatcher::builder(registry)
        .state(Shop { name: "corner" })
        .store(Arc::new(MemoryStore::new()))
        .try_build()
        .unwrap();
    let session = crate::support::session();
    let name = dispatcher
        .dispatch(&session, ToolCall::from_json_text("c1", "shop_name", "{}"))
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(name["data"], "corner", "{name}");
    let deleted = dispatcher
        .dispatch(
            &session,
            ToolCall::from_json_text("c2", "delete_order", r#"{"order_id":"A1"}"#),
        )
        .await
        .unwrap()
        .result
        .to_json();
    let text = deleted["data"].as_str().unwrap();
    assert!(text.starts_with("deleted A1 under "), "{deleted}");
    assert!(text.len() > "deleted A1 under ".len(), "{deleted}");
}
