//! The size of a turn's future, kept in check: every level of the pipeline's future holds the
//! level below it, the whole is moved when a caller awaits it (twice by `Runtime::block_on`),
//! and each move copies every byte. A change that makes a call's path hold more (an `async fn`
//! taking a large argument, which it then holds twice; a scrutinee that lives through an
//! await) fails here before it shows in `benches/dispatch`.

use serde_json::{Value, json};

use crate::provider::OpenAiChat;
use crate::tool::{ToolDescriptor, ToolFuture};
use crate::{AuthContext, Ctx, Dispatcher, Registry, Session, Tool, ToolCall, tool::JsonText};

/// A read that answers at once.
struct Echo;

static ECHO: ToolDescriptor = ToolDescriptor::new("echo", "Answers with its arguments.");

impl Tool for Echo {
    fn descriptor(&self) -> &'static ToolDescriptor {
        &ECHO
    }

    fn args_schema(&self) -> Value {
        json!({"type": "object"})
    }

    fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
    }
}

#[test]
fn a_turn_future_stays_under_its_bound() {
    let mut registry = Registry::new();
    registry.register_tool(Echo).unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![ToolCall::new("c1", "echo", json!({}))];
    let turn = dispatcher.dispatch_turn(&session, calls);
    // 2,056 bytes with Rust 1.95 (4,024 before the call's path stopped holding its arguments
    // twice, and a write's step and a result's explanation were boxed; 2,368 before the grant
    // stopped being held while the call runs, and a read's check and listening for the turn's
    // abort went on the heap); the bound leaves room for a field or two, not for another level
    // held twice.
    assert!(
        size_of_val(&turn) <= 2_176,
        "dispatch_turn's future is {} bytes",
        size_of_val(&turn)
    );
    // 2,128 bytes: the turn's, and the text it reads and renders.
    let format = OpenAiChat::default();
    let answer = dispatcher.answer_turn(&format, &session, "{}");
    assert!(
        size_of_val(&answer) <= 2_248,
        "answer_turn's future is {} bytes",
        size_of_val(&answer)
    );
}
