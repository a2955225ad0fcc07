//! A tool whose output cannot be sent to a model (nested deeper than `JsonText::MAX_DEPTH`, 120
//! arrays and objects, here built from the model's own arguments): the call is answered, no
//! panic; a read answers `internal`; a write, which acted, answers and records
//! `outcome_unknown`, never `failed`, so that the same call, in a new process on the same
//! SQLite file, does not run again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::{Gemini, OpenAiChat, WireFormat};
use toolgate::store::{OperationStore, SqliteStore};

/// `value` inside `depth` arrays.
fn wrapped(value: Value, depth: u32) -> Value {
    (0..depth).fold(value, |inner, _| Value::Array(vec![inner]))
}

/// Echo a value back, wrapped in as many arrays as asked.
#[tool]
async fn echo(value: Value, depth: u32) -> Result<Value, ToolError> {
    Ok(wrapped(value, depth.min(1_000)))
}

/// How often the write ran.
#[derive(Default)]
struct Runs(AtomicU32);

/// Save a value, and answer it wrapped in as many arrays as asked.
#[tool(side_effect = "write", key = [name])]
async fn save(ctx: &Ctx, name: String, value: Value, depth: u32) -> Result<Value, ToolError> {
    let _ = name;
    ctx.state::<Runs>()?.0.fetch_add(1, Ordering::SeqCst);
    Ok(wrapped(value, depth.min(1_000)))
}

/// The model's value: 100 arrays deep, which the arguments' reader accepts.
fn deep_argument() -> Value {
    wrapped(json!("leaf"), 100)
}

#[tokio::test]
async fn a_read_whose_output_nests_too_deep_answers_internal_and_every_format_renders_it() {
    let mut registry = Registry::new();
    registry.register::<echo>().unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let session = crate::support::session();
    // 100 + 20 = 120 levels: sent; 100 + 21: one too many.
    for (depth, status) in [(20, "succeeded"), (21, "error"), (900, "error")] {
        let call = ToolCall::new(
            "c1",
            "echo",
            json!({"value": deep_argument(), "depth": depth}),
        );
        let report = dispatcher.dispatch(&session, call).await.unwrap();
        let answer = report.result.to_json();
        assert_eq!(answer["status"], status, "depth {depth}");
        if status == "error" {
            assert_eq!(answer["error"]["kind"], "internal", "{answer}");
            assert!(
                answer["error"]["why"]
                    .as_str()
                    .unwrap()
                    .contains("more than 120"),
                "{answer}"
            );
        }
        // The answer goes on the wire in a form the model's client reads back, in the format
        // that nests it deepest and in one that sends it as a string.
        let reports = [report];
        for text in [
            Gemini.render_results_text(&reports),
            OpenAiChat::default().render_results_text(&reports),
        ] {
            let text = text.expect("one call is answered");
            serde_json::from_str::<Value>(&text).expect("the rendered answer reads back");
        }
    }
}

#[tokio::test]
async fn a_write_whose_output_nests_too_deep_is_unknown_and_never_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("operations.db");
    let runs = Arc::new(Runs::default());
    let call = ToolCall::new(
        "c1",
        "save",
        json!({"name": "n1", "value": deep_argument(), "depth": 50}),
    );
    let process = || async {
        let store: Arc<dyn OperationStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let mut registry = Registry::new();
        registry.register::<save>().unwrap();
        let dispatcher = Dispatcher::builder(registry)
            .store(store.clone())
            .state_shared(runs.clone())
            .build();
        (dispatcher, store)
    };

    let (first, store) = process().await;
    let session = crate::support::session();
    let answer = first
        .dispatch(&session, call.clone())
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(answer["status"], "outcome_unknown", "{answer}");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
    let records = store.list_unknown(10).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    drop((first, store));

    // A new process on the same file, a new run: the same call is not run again.
    let (second, _store) = process().await;
    let session = crate::support::session_in("run-2");
    let again = second
        .dispatch(&session, call)
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1, "the write ran again");
}
