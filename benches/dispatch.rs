//! One OpenAI Chat Completions turn with one small read tool, several ways in one run:
//!
//! - `hand_written`: serde alone: parse the assistant message into structs, deserialize the
//!   arguments, call the fn, serialize the `role: "tool"` message with the same result object
//!   (`{"status":"succeeded","replayed":false,"data":…}`) toolgate sends;
//! - `toolgate`: parse the message, dispatch (look-up, validation, authorisation from the
//!   session, the deadline, the trace span), render the tool message. The tool's one argument is
//!   a `String`, a type whose serde reading accepts exactly what its schema accepts, so the
//!   arguments' text is validated as it is read into the parameters (the reading of text
//!   `#[tool]` generates);
//! - `answer_turn`: the same turn through `Dispatcher::answer_turn`, which takes the assistant's
//!   message as text and gives the text to send, reading each call's arguments once;
//! - `toolgate_schema_validated`: the same, with the tool made to decline that reading, so that
//!   the arguments are parsed into a tree, validated against the schema by `jsonschema` and
//!   deserialized: the path of a tool with any other argument type;
//! - `rmcp_router`: the tool declared with rmcp's `#[tool_router]`, each call's arguments parsed
//!   into the JSON object an MCP `tools/call` carries and routed by rmcp's `ToolRouter` (look-up,
//!   deserialization through `Parameters<T>`), the result the text content of its
//!   `CallToolResult` (see `benches/rmcp_router`);
//! - `toolgate_policies`: `toolgate` with every run policy doing its work on each call: the tool
//!   declares `rate_limit = "1000000/s"` (a bucket is checked and never empties), the run limits
//!   are finite (the step, call and retry counters are checked and counted), and a failed call of
//!   the tool is recorded in the run beforehand (so repeat detection computes the call's
//!   fingerprint and looks it up on every call).
//!
//! Every session here dispatches many turns in one run, so the dispatchers of `toolgate` and
//! `toolgate_schema_validated` are given `RunLimits::UNLIMITED` (the default limits would abort
//! the run after 50 turns; a session per iteration would measure its set-up instead); the
//! counters are still kept, only never reached. `toolgate_policies` uses limits that are finite
//! but out of reach (`u32::MAX`).
//!
//! All of them send the same bytes (checked before measuring). The figures that matter are the
//! ratios to `hand_written`. Run with `cargo bench --bench dispatch`.
//!
//! Instructions and allocations, which this machine's timings are too noisy to compare finely:
//! with `TOOLGATE_DISPATCH_TURNS=N` (and `TOOLGATE_DISPATCH_PATH=toolgate`, `hand_written`,
//! `answer_turn` or `rmcp_router`), the bench answers N turns that way, each in a
//! `Runtime::block_on` as criterion's iterations are, and exits. Count a run of N turns and one
//! of 2N under callgrind (collection on in `dispatch::main`, where `block_on` may be inlined)
//! and divide the difference by N: one turn, with nothing of the set-up (the router's start
//! included), the same from run to run within a few instructions. Valgrind's DHAT counts the
//! allocations (`--tool=dhat`, blocks) the same way.
//!
//! ```sh
//! count() { TOOLGATE_DISPATCH_PATH=$1 TOOLGATE_DISPATCH_TURNS=$2 valgrind --tool=callgrind \
//!   --toggle-collect='dispatch::main' --callgrind-out-file=/dev/null \
//!   target/release/deps/dispatch-HASH 2>&1 | sed -n 's/.*Collected : //p' | tr -d ,; }
//! for path in hand_written toolgate answer_turn rmcp_router; do
//!   echo "$path $(( ($(count $path 4000) - $(count $path 2000)) / 2000 ))"
//! done
//! ```

use criterion::{Criterion, criterion_group};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::hint::black_box;
use toolgate::prelude::*;
use toolgate::provider::{OpenAiChat, WireFormat};
use toolgate::{
    Tool,
    tool::{ToolDescriptor, ToolFuture},
};

const TURN: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ORD-1001\"}"}}]}"#;

#[derive(Serialize)]
struct Order {
    order_id: String,
    paid: &'static str,
}

/// An order id no order has: the policies' run records a failed call of it.
const MISSING: &str = "ORD-0";

async fn lookup(order_id: String) -> Result<Order, ToolError> {
    if order_id == MISSING {
        return Err(ToolError::not_found(format!(
            "there is no order {order_id}"
        )));
    }
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

/// `get_order` with a rate limit that never limits: every call takes a token from its
/// tenant's bucket.
#[tool(
    name = "get_order",
    permission = "orders:read",
    timeout = "5s",
    rate_limit = "1000000/s"
)]
async fn get_order_rate_limited(
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

mod by_hand;
mod rmcp_router;

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

/// The turn answered by `Dispatcher::answer_turn`, the entry point that takes the assistant's
/// message and gives the text to send.
async fn answered(dispatcher: &Dispatcher, session: &Session, turn: &str) -> String {
    let format = OpenAiChat { strict: true };
    let answer = dispatcher
        .answer_turn(&format, session, turn)
        .await
        .expect("the turn runs");
    let message = answer.message.expect("a turn with calls is answered");
    message.into_string()
}

async fn with_toolgate(dispatcher: &Dispatcher, session: &Session, turn: &str) -> String {
    let format = OpenAiChat { strict: true };
    let calls = format.parse_calls_text(turn).unwrap();
    let reports = dispatcher.dispatch_turn(session, calls).await.unwrap();
    format
        .render_results_text(&reports)
        .expect("a turn with calls is answered")
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .build();
    let mut registry = Registry::new();
    registry.register::<SchemaValidated>().unwrap();
    let validating = Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .build();
    let mut registry = Registry::new();
    registry.register::<get_order_rate_limited>().unwrap();
    let policed = Dispatcher::builder(registry)
        .run_limits(
            RunLimits::DEFAULT
                .max_steps(u32::MAX)
                .max_tool_calls(u32::MAX)
                .retry_budget(u32::MAX),
        )
        .build();
    let auth = AuthContext::new("acme", "agent").with_permissions(["orders:read"]);
    let session = Session::new(auth.clone(), "run-1");
    // The policies' run holds a failed call of the tool, so each call's fingerprint is computed
    // and looked up.
    let policed_session = Session::new(auth, "run-2");
    let failed = runtime
        .block_on(policed.dispatch(
            &policed_session,
            ToolCall::new(
                "call_0",
                "get_order",
                serde_json::json!({"order_id": MISSING}),
            ),
        ))
        .unwrap();
    assert_eq!(failed.result.error_kind(), Some(ErrorKind::NotFound));
    let repeated = runtime
        .block_on(policed.dispatch(
            &policed_session,
            ToolCall::new(
                "call_1",
                "get_order",
                serde_json::json!({"order_id": MISSING}),
            ),
        ))
        .unwrap();
    assert_eq!(
        repeated.result.error_kind(),
        Some(ErrorKind::RepeatedCall),
        "repeat detection is on in the policies' run"
    );
    // Every path answers the same turn with the same bytes: the ratios measure the pipeline
    // (validation, authorisation, deadline, span), not a difference in what is sent.
    let by_hand = runtime.block_on(hand_written(TURN));
    let ours = runtime.block_on(with_toolgate(&dispatcher, &session, TURN));
    assert_eq!(by_hand, ours, "both paths must send the same bytes");
    let answered_text = runtime.block_on(answered(&dispatcher, &session, TURN));
    assert_eq!(
        by_hand, answered_text,
        "both paths must send the same bytes"
    );
    let validated = runtime.block_on(with_toolgate(&validating, &session, TURN));
    assert_eq!(by_hand, validated, "both paths must send the same bytes");
    let policies = runtime.block_on(with_toolgate(&policed, &policed_session, TURN));
    assert_eq!(by_hand, policies, "both paths must send the same bytes");
    let router = runtime.block_on(rmcp_router::Router::start());
    let routed = runtime.block_on(router.answer(TURN));
    assert_eq!(by_hand, routed, "both paths must send the same bytes");

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("hand_written", |b| {
        b.iter(|| runtime.block_on(hand_written(black_box(TURN))))
    });
    group.bench_function("toolgate", |b| {
        b.iter(|| runtime.block_on(with_toolgate(&dispatcher, &session, black_box(TURN))))
    });
    group.bench_function("answer_turn", |b| {
        b.iter(|| runtime.block_on(answered(&dispatcher, &session, black_box(TURN))))
    });
    group.bench_function("rmcp_router", |b| {
        b.iter(|| runtime.block_on(router.answer(black_box(TURN))))
    });
    group.bench_function("toolgate_schema_validated", |b| {
        b.iter(|| runtime.block_on(with_toolgate(&validating, &session, black_box(TURN))))
    });
    group.bench_function("toolgate_policies", |b| {
        b.iter(|| runtime.block_on(with_toolgate(&policed, &policed_session, black_box(TURN))))
    });
    group.finish();
}

criterion_group!(benches, dispatch);

/// `turns` turns answered along `path`, for callgrind.
fn counted(turns: usize, path: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .build();
    let auth = AuthContext::new("acme", "agent").with_permissions(["orders:read"]);
    let session = Session::new(auth, "run-1");
    // The router's start is a `block_on` too, counted once: for `rmcp_router`, take the
    // difference of runs of N and 2N turns.
    let router = (path == "rmcp_router").then(|| runtime.block_on(rmcp_router::Router::start()));
    // A `block_on` a turn, as criterion's iterations have it: callgrind counts inside it.
    for _ in 0..turns {
        let sent = match path {
            "hand_written" => runtime.block_on(hand_written(black_box(TURN))),
            "toolgate" => runtime.block_on(with_toolgate(&dispatcher, &session, black_box(TURN))),
            "answer_turn" => runtime.block_on(answered(&dispatcher, &session, black_box(TURN))),
            "rmcp_router" => {
                let router = router.as_ref().expect("started for this path");
                runtime.block_on(router.answer(black_box(TURN)))
            }
            other => panic!(
                "TOOLGATE_DISPATCH_PATH is hand_written, toolgate, answer_turn or rmcp_router, not {other}"
            ),
        };
        black_box(sent);
    }
}

fn main() {
    if let Ok(turns) = std::env::var("TOOLGATE_DISPATCH_TURNS") {
        let turns = turns
            .parse()
            .expect("TOOLGATE_DISPATCH_TURNS is a number of turns");
        let path = std::env::var("TOOLGATE_DISPATCH_PATH").unwrap_or_else(|_| "toolgate".into());
        counted(turns, &path);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
