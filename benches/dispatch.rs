//! One OpenAI Chat Completions turn with one small read tool, two ways in one run:
//!
//! - `hand_written`: serde alone: parse the assistant message into structs, deserialize the
//!   arguments, call the fn, serialize the `role: "tool"` message with the same result object
//!   (`{"status":"succeeded","replayed":false,"data":…}`) toolgate sends;
//! - `toolgate`: parse the message, dispatch (look-up, validation, authorisation from the
//!   session, the deadline, the trace span), render the tool message. The tool's one argument is
//!   a `String`, a type whose serde reading accepts exactly what its schema accepts, so the
//!   arguments' text is validated as it is read into the parameters (`Tool::invoke_text`);
//! - `toolgate_schema_validated`: the same, with the tool made to decline that reading, so that
//!   the arguments are parsed into a tree, validated against the schema by `jsonschema` and
//!   deserialized: the path of a tool with any other argument type.
//!
//! All three send the same bytes (checked before measuring). The figures that matter are the
//! ratios to `hand_written`. Run with `cargo bench --bench dispatch`.

use criterion::{Criterion, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::hint::black_box;
use toolgate::prelude::*;
use toolgate::provider::{OpenAiChat, WireFormat};
use toolgate::{Tool, ToolDescriptor, ToolFuture};

const TURN: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ORD-1001\"}"}}]}"#;

#[derive(Serialize)]
struct Order {
    order_id: String,
    paid: &'static str,
}

async fn lookup(order_id: String) -> Result<Order, ToolError> {
    Ok(Order {
        order_id,
        paid: "500.00",
    })
}

/// Look up an order.
#[tool(permission = "orders:read", timeout = "5s")]
async fn get_order(
    /// The order id.
    order_id: String,
) -> Result<Order, ToolError> {
    lookup(order_id).await
}

/// `get_order`, declining to read its arguments' text itself: every call takes the path that
/// validates a tree against the schema.
#[derive(Default)]
struct SchemaValidated(get_order);

impl Tool for SchemaValidated {
    fn descriptor(&self) -> &'static ToolDescriptor {
        self.0.descriptor()
    }

    fn args_schema(&self) -> Value {
        self.0.args_schema()
    }

    fn invoke<'a>(&'a self, ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
        self.0.invoke(ctx, args)
    }
}

mod by_hand {
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize)]
    pub(crate) struct Message {
        pub(crate) tool_calls: Vec<Call>,
    }

    #[derive(Deserialize)]
    pub(crate) struct Call {
        pub(crate) id: String,
        pub(crate) function: Function,
    }

    #[derive(Deserialize)]
    pub(crate) struct Function {
        pub(crate) name: String,
        pub(crate) arguments: String,
    }

    /// The result object, the content both paths send back.
    #[derive(Serialize)]
    pub(crate) struct Envelope<'a, T> {
        pub(crate) status: &'static str,
        pub(crate) replayed: bool,
        pub(crate) data: &'a T,
    }

    #[derive(Serialize)]
    pub(crate) struct ToolMessage<'a> {
        pub(crate) role: &'static str,
        pub(crate) tool_call_id: &'a str,
        pub(crate) content: String,
    }
}

#[derive(Deserialize)]
struct GetOrderArgs {
    order_id: String,
}

async fn hand_written(turn: &str) -> String {
    let message: by_hand::Message = serde_json::from_str(turn).unwrap();
    let mut out = Vec::with_capacity(message.tool_calls.len());
    for call in &message.tool_calls {
        assert_eq!(call.function.name, "get_order");
        let args: GetOrderArgs = serde_json::from_str(&call.function.arguments).unwrap();
        let order = lookup(args.order_id).await.unwrap();
        out.push(by_hand::ToolMessage {
            role: "tool",
            tool_call_id: &call.id,
            content: serde_json::to_string(&by_hand::Envelope {
                status: "succeeded",
                replayed: false,
                data: &order,
            })
            .unwrap(),
        });
    }
    serde_json::to_string(&out).unwrap()
}

async fn with_toolgate(dispatcher: &Dispatcher, session: &Session, turn: &str) -> String {
    let format = OpenAiChat { strict: true };
    let calls = format.parse_calls_text(turn).unwrap();
    let reports = dispatcher.dispatch_turn(session, calls).await.unwrap();
    format.render_results_text(&reports)
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let mut registry = Registry::new();
    registry.register::<SchemaValidated>().unwrap();
    let validating = Dispatcher::builder(registry).build();
    let session = Session::new(
        AuthContext::new("acme", "agent").with_permissions(["orders:read"]),
        "run-1",
    );
    // Every path answers the same turn with the same bytes: the ratios measure the pipeline
    // (validation, authorisation, deadline, span), not a difference in what is sent.
    let by_hand = runtime.block_on(hand_written(TURN));
    let ours = runtime.block_on(with_toolgate(&dispatcher, &session, TURN));
    assert_eq!(by_hand, ours, "both paths must send the same bytes");
    let validated = runtime.block_on(with_toolgate(&validating, &session, TURN));
    assert_eq!(by_hand, validated, "both paths must send the same bytes");

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("hand_written", |b| {
        b.iter(|| runtime.block_on(hand_written(black_box(TURN))))
    });
    group.bench_function("toolgate", |b| {
        b.iter(|| runtime.block_on(with_toolgate(&dispatcher, &session, black_box(TURN))))
    });
    group.bench_function("toolgate_schema_validated", |b| {
        b.iter(|| runtime.block_on(with_toolgate(&validating, &session, black_box(TURN))))
    });
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
