//! Tools written by hand against the `Tool` trait, and reports, for the format tests.

use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::call::CallReport;
use crate::ctx::Ctx;
use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::registry::Registry;
use crate::result::CallResult;
use crate::schema::canonical_schema_for;
use crate::side_effect::SideEffect;
use crate::tool::{Tool, ToolFuture};

/// A tool with a fixed descriptor and the canonical schema of `A`.
pub(super) struct Fixed<A> {
    descriptor: &'static ToolDescriptor,
    args: std::marker::PhantomData<fn() -> A>,
}

impl<A: JsonSchema + 'static> Fixed<A> {
    pub(super) fn new(descriptor: &'static ToolDescriptor) -> Self {
        Fixed {
            descriptor,
            args: std::marker::PhantomData,
        }
    }
}

impl<A: JsonSchema + 'static> Tool for Fixed<A> {
    fn descriptor(&self) -> &'static ToolDescriptor {
        self.descriptor
    }

    fn args_schema(&self) -> Value {
        canonical_schema_for::<A>()
    }

    fn invoke<'a>(&'a self, _ctx: &'a Ctx, _args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async { Ok(crate::tool::JsonText::of(&Value::Null).expect("null serializes")) })
    }
}

// The arguments of the weather tool every format test declares.
#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct WeatherArgs {
    pub(super) city: String,
    pub(super) unit: Option<String>,
}

// A write tool's arguments.
#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct RefundArgs {
    pub(super) order_id: String,
    pub(super) amount: u32,
}

// Arguments strict mode and Gemini cannot take: a map.
#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct TagArgs {
    pub(super) tags: std::collections::BTreeMap<String, String>,
}

// No arguments at all.
#[derive(JsonSchema)]
pub(super) struct NoArgs {}

pub(super) static WEATHER: ToolDescriptor =
    ToolDescriptor::new("get_weather", "Current weather for a city.");
pub(super) static REFUND: ToolDescriptor =
    ToolDescriptor::new("issue_refund", "Refund an order.").with_side_effect(SideEffect::Write);
pub(super) static DELETE: ToolDescriptor = ToolDescriptor::new("delete_order", "Delete an order.")
    .with_side_effect(SideEffect::Destructive);
pub(super) static TAG: ToolDescriptor = ToolDescriptor::new("tag_order", "Tag an order.");
pub(super) static PING: ToolDescriptor = ToolDescriptor::new("ping", "Check the service.");

/// `get_weather`, `issue_refund` (write), `delete_order` (destructive), `tag_order` (a map
/// argument) and `ping` (no arguments), in that order.
pub(super) fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register_tool(Fixed::<WeatherArgs>::new(&WEATHER))
        .unwrap()
        .register_tool(Fixed::<RefundArgs>::new(&REFUND))
        .unwrap()
        .register_tool(Fixed::<RefundArgs>::new(&DELETE))
        .unwrap()
        .register_tool(Fixed::<TagArgs>::new(&TAG))
        .unwrap()
        .register_tool(Fixed::<NoArgs>::new(&PING))
        .unwrap();
    registry
}

/// The canonical schema of `get_weather`, the tool every format test declares.
pub(super) fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
        "required": ["city"],
        "additionalProperties": false
    })
}

/// A success with `{"temp_c": 21}`.
pub(super) fn success(call_id: &str) -> CallReport {
    CallReport {
        call_id: call_id.into(),
        tool: "get_weather".into(),
        result: CallResult::succeeded(crate::tool::JsonText::of(&json!({"temp_c": 21})).unwrap()),
    }
}

/// A `not_found` error.
pub(super) fn failure(call_id: &str) -> CallReport {
    let err = ToolError::not_found("city not found")
        .with_why("no match for 'Pariss'")
        .with_next("check the spelling");
    CallReport {
        call_id: call_id.into(),
        tool: "get_weather".into(),
        result: CallResult::from_error(&err),
    }
}

/// An `unknown_tool` error for a tool named `name`.
pub(super) fn unknown_tool(call_id: &str, name: &str) -> CallReport {
    let err = ToolError::new(crate::ErrorKind::UnknownTool, "there is no tool named that");
    CallReport {
        call_id: call_id.into(),
        tool: name.into(),
        result: CallResult::from_error(&err),
    }
}

/// Turns that are not messages of any format, for the never-panics tests.
pub(super) fn garbage_turns() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(42),
        json!("tool_calls"),
        json!([null, 1, "x", [], {}]),
        json!({}),
        json!({"tool_calls": 5, "content": 5, "parts": 5, "output": 5, "params": 5}),
        json!({"tool_calls": [null, 1, "x", [], {}]}),
        json!({"content": [null, 1, {"type": "tool_use"}, {"type": "tool_use", "input": [1]}]}),
        json!({"parts": [null, {"functionCall": 1}, {"functionCall": {"args": "x"}}]}),
        json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}),
        json!({"candidates": "x"}),
        json!({"output": [{"type": "function_call"}, {"type": "function_call", "arguments": {}}]}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "id": [1], "params": {"arguments": 3}}),
        json!({"jsonrpc": "2.0", "method": "tools/call"}),
    ]
}
