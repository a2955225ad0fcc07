//! Arguments named like the fn, like the generated code's parameters (`ctx`, `args`), or like
//! an injected parameter's binding do not shadow anything.

use serde_json::{Value, json};
use toolgate::prelude::*;

/// Echo the text back.
#[tool]
async fn echo(echo: String, args: u32, c: &Ctx, ctx: String) -> Result<Value, ToolError> {
    Ok(json!({"echo": echo, "args": args, "ctx": ctx, "run": c.run_id()}))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut registry = Registry::new();
    registry.register::<echo>().unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![ToolCall::new(
        "1",
        "echo",
        json!({"echo": "hi", "args": 2, "ctx": "c"}),
    )];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(
        reports[0].result.to_json()["data"],
        json!({"echo": "hi", "args": 2, "ctx": "c", "run": "run-1"})
    );
}
