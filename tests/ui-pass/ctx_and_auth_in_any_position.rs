//! `&Ctx` and `&AuthContext` are injected wherever they stand, and never appear in the schema.

use serde_json::{Value, json};
use toolgate::prelude::*;

/// Tag an order for the caller.
#[tool]
async fn tag_order(
    auth: &AuthContext,
    /// The order to tag.
    order_id: String,
    ctx: &Ctx,
    /// The tag.
    tag: String,
) -> Result<Value, ToolError> {
    Ok(json!({"tenant": auth.tenant(), "order_id": order_id, "run": ctx.run_id(), "tag": tag}))
}

/// Say who is calling.
#[tool]
async fn whoami(ctx: &Ctx, auth: &AuthContext) -> Result<String, ToolError> {
    Ok(format!(
        "{}@{} in {}",
        auth.user(),
        auth.tenant(),
        ctx.run_id()
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let schema = tag_order::args_schema();
    assert_eq!(schema["required"], json!(["order_id", "tag"]));
    assert_eq!(whoami::args_schema()["properties"], json!({}));

    let mut registry = Registry::new();
    registry
        .register::<tag_order>()
        .unwrap()
        .register::<whoami>()
        .unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![
        ToolCall::new("1", "tag_order", json!({"order_id": "ORD-1", "tag": "vip"})),
        ToolCall::new("2", "whoami", json!({})),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(
        reports[0].result.to_json()["data"],
        json!({"tenant": "acme", "order_id": "ORD-1", "run": "run-1", "tag": "vip"})
    );
    assert_eq!(reports[1].result.to_json()["data"], "agent@acme in run-1");
}
