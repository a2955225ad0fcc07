//! One OpenAI Chat Completions turn whose one call carries large arguments, at 1 KB, 10 KB and
//! 1 MB of argument text, three ways in one run:
//!
//! - `hand_written`: serde alone: the assistant message parsed into structs, the arguments'
//!   text deserialized into the tool's parameters, the fn called, the `role: "tool"` message
//!   written with the same result object toolgate sends;
//! - `answer_turn`: `Dispatcher::answer_turn`, which leaves each call's arguments for the tool
//!   to check as it reads them: one pass over the arguments' text, as by hand;
//! - `parse_then_dispatch`: `WireFormat::parse_calls_text`, which checks each call's arguments
//!   before anything else sees them, then `Dispatcher::dispatch_turn` and
//!   `WireFormat::render_results_text`: two passes over the arguments' text.
//!
//! The tool takes one `String`, a type whose serde reading accepts exactly what its schema
//! accepts, so the arguments are never built as a tree. At 1 MB the fixed cost of a turn is
//! lost in the cost per byte: the ratio there is the cost per byte of arguments against the
//! hand-written path's. All three answer the same messages (checked before measuring). Run with
//! `cargo bench --bench arguments`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::prelude::*;
use toolgate::provider::{OpenAiChat, WireFormat};

const FORMAT: OpenAiChat = OpenAiChat { strict: true };

async fn measure(note: String) -> Result<usize, ToolError> {
    Ok(note.chars().filter(|c| *c == '\n').count())
}

/// Count the lines of a note.
#[tool(permission = "notes:read")]
async fn count_lines(
    /// The note.
    note: String,
) -> Result<usize, ToolError> {
    measure(note).await
}

mod by_hand;

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CountLinesArgs {
    note: String,
}

async fn hand_written(turn: &str) -> String {
    let message: by_hand::Message = serde_json::from_str(turn).unwrap();
    let mut out = Vec::with_capacity(message.tool_calls.len());
    for call in &message.tool_calls {
        assert_eq!(call.function.name, "count_lines");
        let args: CountLinesArgs = serde_json::from_str(&call.function.arguments).unwrap();
        let lines = measure(args.note).await.unwrap();
        out.push(by_hand::ToolMessage {
            role: "tool",
            tool_call_id: &call.id,
            content: serde_json::to_string(&by_hand::Envelope {
                status: "succeeded",
                replayed: false,
                data: &lines,
            })
            .unwrap(),
        });
    }
    serde_json::to_string(&out).unwrap()
}

async fn answer_turn(dispatcher: &Dispatcher, session: &Session, turn: &str) -> String {
    let answer = dispatcher
        .answer_turn(&FORMAT, session, turn)
        .await
        .unwrap();
    let message = answer.message.expect("a turn with calls is answered");
    message.into_string()
}

async fn parse_then_dispatch(dispatcher: &Dispatcher, session: &Session, turn: &str) -> String {
    let calls = FORMAT.parse_calls_text(turn).unwrap();
    let reports = dispatcher.dispatch_turn(session, calls).await.unwrap();
    FORMAT
        .render_results_text(&reports)
        .expect("a turn with calls is answered")
}

/// A note of `size` bytes: lines of prose, with the quotes and backslashes JSON escapes.
fn note(size: usize) -> String {
    const LINE: &str = "The customer says \"the parcel never came\"; see C:\\orders\\1001.\n";
    LINE.repeat(size / LINE.len() + 1)[..size].to_owned()
}

/// The assistant message calling `count_lines` with `note`.
fn turn(note: &str) -> String {
    let arguments = serde_json::to_string(&CountLinesArgs {
        note: note.to_owned(),
    })
    .unwrap();
    serde_json::json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": "call_1",
            "type": "function",
            "function": {"name": "count_lines", "arguments": arguments},
        }],
    })
    .to_string()
}

fn arguments(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut registry = Registry::new();
    registry.register::<count_lines>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .build();
    let auth = AuthContext::new("acme", "agent").with_permissions(["notes:read"]);
    let session = Session::new(auth, "run-1");

    let mut group = c.benchmark_group("arguments");
    group.sample_size(20);
    for (label, size) in [("1KB", 1 << 10), ("10KB", 10 << 10), ("1MB", 1 << 20)] {
        let turn = turn(&note(size));
        // The three answer the same messages: the ratios measure the reading, not the output.
        let by_hand: Value = serde_json::from_str(&runtime.block_on(hand_written(&turn))).unwrap();
        let answered: Value =
            serde_json::from_str(&runtime.block_on(answer_turn(&dispatcher, &session, &turn)))
                .unwrap();
        let dispatched: Value = serde_json::from_str(&runtime.block_on(parse_then_dispatch(
            &dispatcher,
            &session,
            &turn,
        )))
        .unwrap();
        assert_eq!(by_hand, answered, "answer_turn must send the same messages");
        assert_eq!(
            by_hand, dispatched,
            "dispatch_turn must send the same messages"
        );

        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("hand_written", label), &turn, |b, turn| {
            b.iter(|| runtime.block_on(hand_written(black_box(turn))))
        });
        group.bench_with_input(BenchmarkId::new("answer_turn", label), &turn, |b, turn| {
            b.iter(|| runtime.block_on(answer_turn(&dispatcher, &session, black_box(turn))))
        });
        group.bench_with_input(
            BenchmarkId::new("parse_then_dispatch", label),
            &turn,
            |b, turn| {
                b.iter(|| {
                    runtime.block_on(parse_then_dispatch(&dispatcher, &session, black_box(turn)))
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, arguments);
criterion_main!(benches);
