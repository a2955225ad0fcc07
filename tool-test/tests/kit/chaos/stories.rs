//! Stories played on a refund tool of one's own, on a SQLite file (and some on a PostgreSQL
//! database), its provider behind the fault proxy, and checked against the provider's ledger:
//! the tool done right keeps every promise, a tool that sends no key is caught applying a refund
//! twice, a reconcile hook that answers without asking is caught leaving a refund unaccounted
//! for, and a restart and a second process on the same store keep each refund once.

mod payments;
pub(super) mod tools;

use std::sync::Arc;

use http::Method;
use serde_json::{Value, json};
use tempfile::TempDir;
use toolgate::outbox::OutboxWorker;
use toolgate::prelude::*;
use toolgate::store::OutboxEvent;
use toolgate::store::{Decided, OperationState, OperationStore, PostgresStore, SqliteStore};
use toolgate::tool::RetrySpec;
use toolgate_test::chaos::{
    Answer, Fault, FaultProxy, PlayError, Played, Route, Stage, Story, Upstream, Violation, play,
};

use self::payments::Payments;
use self::tools::PaymentsUrl;
use super::client::{request, send};
use super::patiently;

/// The provider, the proxy in front of it, and a stage on a SQLite file in a directory of its
/// own (or a PostgreSQL database of its own), with the registry `registry` builds.
pub(super) struct Scene {
    pub(super) payments: Payments,
    pub(super) proxy: FaultProxy,
    pub(super) stage: Stage,
    _dir: TempDir,
}

/// Where a scene's stage keeps its operations.
#[derive(Debug, Clone, Copy)]
pub(super) enum Store {
    /// A SQLite file in the scene's directory.
    Sqlite,
    /// A fresh database on the tests' PostgreSQL server.
    Postgres,
}

impl Scene {
    async fn new(registry: fn() -> Registry) -> Scene {
        Scene::on(Store::Sqlite, registry).await
    }

    pub(super) async fn on(store: Store, registry: fn() -> Registry) -> Scene {
        let payments = Payments::start().await;
        let proxy = FaultProxy::start(payments.addr()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.sqlite");
        let url = match store {
            Store::Sqlite => None,
            Store::Postgres => Some(toolgate_test_postgres::test_database().await),
        };
        let addr = proxy.addr();
        let stage = Stage::new(
            move || {
                let (path, url) = (path.clone(), url.clone());
                async move {
                    // Each opening is a pool of its own, as each process has.
                    let store: Arc<dyn OperationStore> = match url {
                        None => Arc::new(SqliteStore::open(&path).await?),
                        Some(url) => Arc::new(PostgresStore::connect(&url).await?),
                    };
                    Ok(store)
                }
            },
            move |store| {
                Dispatcher::builder(registry())
                    .store(store)
                    .state(PaymentsUrl(addr))
                    .jitter_seed(7)
                    .build()
            },
        )
        .with_plan(proxy.plan().clone());
        Scene {
            payments,
            proxy,
            stage,
            _dir: dir,
        }
    }

    /// Plays `story`, and waits for every request the proxy sent to be answered by the
    /// provider, so that its ledger is final.
    pub(super) async fn play(&self, story: &Story) -> Played {
        let played = play(&self.stage, story).await.unwrap();
        patiently(self.proxy.plan().wait_for(|records| {
            records
                .iter()
                .all(|record| record.upstream != Upstream::Sent)
        }))
        .await;
        played
    }

    /// How many refunds were posted to the provider, whatever became of them.
    fn posted(&self) -> usize {
        self.proxy.plan().count(&Route::post("/refunds"))
    }
}

/// A registry of the one tool `T`.
fn only<T: toolgate::Tool + Default>() -> Registry {
    let mut registry = Registry::new();
    registry.register::<T>().unwrap();
    registry
}

/// The stories' registries, one version of the refund tool each.
pub(super) const RIGHT: fn() -> Registry = only::<tools::right::refund>;
pub(super) const KEYLESS: fn() -> Registry = only::<tools::keyless::refund>;
pub(super) const APPROVED: fn() -> Registry = only::<tools::approved::refund>;
pub(super) const GUESSING: fn() -> Registry = only::<tools::guessing::refund>;
pub(super) const QUEUED: fn() -> Registry = only::<tools::queued::refund>;
const QUEUED_UNHOOKED: fn() -> Registry = only::<tools::queued_unhooked::refund>;

/// The OpenAI assistant message asking for a refund of `order` as call `id`.
fn openai(id: &str, order: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "refund", "arguments": json!({"order_id": order}).to_string()}}]})
}

/// The same in Anthropic's form.
fn anthropic(id: &str, order: &str) -> Value {
    json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": id, "name": "refund", "input": {"order_id": order}}]})
}

/// The same in Gemini's form (Gemini sends no call id: the first call of a turn gets
/// `gemini_call_0`).
fn gemini(order: &str) -> Value {
    json!({"role": "model", "parts": [{"functionCall": {"name": "refund", "args": {"order_id": order}}}]})
}

/// The status of call `id` in the turn of `line`, and whether it was replayed.
fn status(played: &Played, line: usize, id: &str) -> (&'static str, bool) {
    let (_, turn) = played
        .turns()
        .find(|(at, _)| *at == line)
        .unwrap_or_else(|| panic!("line {line} is a turn"));
    let report = turn
        .report(id)
        .unwrap_or_else(|| panic!("line {line} answers {id}: {turn:?}"));
    (report.result.status.as_str(), report.result.replayed)
}

/// The reconcile pass of `line`: succeeded, failed, still unknown.
fn reconciled(played: &Played, line: usize) -> (u32, u32, u32) {
    let answer = played
        .answers
        .iter()
        .find(|answered| answered.line == line)
        .map(|answered| &answered.answer);
    match answer {
        Some(Answer::Reconciled(report)) => (report.succeeded, report.failed, report.still_unknown),
        other => panic!("line {line} is a reconcile pass: {other:?}"),
    }
}

/// The model asks for a refund, its answer is lost after the provider applied it, the model
/// asks again while the outcome is unknown, the reconciler settles it, and the model asks once
/// more.
const LOST_THEN_ASKED_AGAIN: &str = r#"{"session": {"tenant": "acme", "user": "agent", "permissions": []}}
{"fault": {"route": "POST /refunds", "kind": "drop_after_apply", "times": 1}}
{"openai": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1001\"}"}}]}}
{"openai": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1001\"}"}}]}}
{"reconcile": {}}
{"openai": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1001\"}"}}]}}
"#;

#[tokio::test]
async fn a_lost_answer_asked_again_then_reconciled_is_applied_once_by_the_right_tool() {
    let story = Story::from_jsonl(LOST_THEN_ASKED_AGAIN).unwrap();
    let scene = Scene::new(RIGHT).await;
    let played = scene.play(&story).await;

    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 3, "call_1"), ("outcome_unknown", false));
    assert_eq!(status(&played, 4, "call_2"), ("outcome_unknown", true));
    assert_eq!(
        reconciled(&played, 5),
        (1, 0, 0),
        "the hook found it applied"
    );
    assert_eq!(status(&played, 6, "call_3"), ("succeeded", true));
    assert_eq!(scene.payments.applied().len(), 1);
    assert_eq!(
        scene.posted(),
        1,
        "the store answered every call after the first"
    );
}

#[tokio::test]
async fn the_same_story_catches_a_tool_that_sends_no_key() {
    let story = Story::from_jsonl(LOST_THEN_ASKED_AGAIN).unwrap();
    let scene = Scene::new(KEYLESS).await;
    let played = scene.play(&story).await;

    assert_eq!(
        reconciled(&played, 5),
        (0, 1, 0),
        "the hook found no refund under the key, which the provider never saw"
    );
    assert_eq!(
        status(&played, 6, "call_3"),
        ("succeeded", false),
        "run again"
    );
    let violations = played
        .check(|| scene.payments.applied())
        .unwrap_err()
        .into_vec();
    let twice = Violation::AppliedMoreThanOnce {
        operation: "refund ORD-1001".to_owned(),
        keys: vec![None, None],
    };
    assert!(violations.contains(&twice), "{violations:#?}");
    let text = twice.to_string();
    assert!(
        text.contains("applied 2 times") && text.contains("does not pass the operation's key"),
        "{text}"
    );
    let unkeyed = violations
        .iter()
        .filter(|violation| matches!(violation, Violation::Unaccounted { key: None, .. }))
        .count();
    assert_eq!(unkeyed, 2, "{violations:#?}");
}

/// The model asks for a refund, its answer is lost after the provider applied it, and the
/// reconciler settles it.
fn lost_then_reconciled() -> Story {
    Story::new()
        .fault(Route::post("/refunds"), Fault::DropAfterApply, 1)
        .openai(openai("call_1", "ORD-1001"))
        .reconcile()
}

#[tokio::test]
async fn a_reconcile_hook_that_answers_without_asking_leaves_an_effect_unaccounted_for() {
    let story = lost_then_reconciled();

    let scene = Scene::new(RIGHT).await;
    let played = scene.play(&story).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(reconciled(&played, 3), (1, 0, 0));

    let scene = Scene::new(GUESSING).await;
    let played = scene.play(&story).await;
    assert_eq!(reconciled(&played, 3), (0, 1, 0), "settled as not applied");
    let (_, turn) = played.turns().next().unwrap();
    let key = turn.asked[0].key.clone().expect("a write has a key");
    let violations = played
        .check(|| scene.payments.applied())
        .unwrap_err()
        .into_vec();
    let unaccounted = Violation::Unaccounted {
        operation: "refund ORD-1001".to_owned(),
        key: Some(key),
        state: Some(OperationState::Failed),
    };
    assert_eq!(violations, std::slice::from_ref(&unaccounted));
    let text = unaccounted.to_string();
    assert!(
        text.contains("failed after the final reconcile")
            && text.contains("answers \"not applied\" without asking"),
        "{text}"
    );
}

/// A lost answer, a restart, a second process, a reconcile pass, and a second refund across
/// both processes and another restart, its turns in every wire format.
fn restarts_and_a_second_process() -> Story {
    Story::new()
        .fault(Route::post("/refunds"), Fault::DropAfterApply, 1)
        .anthropic(anthropic("toolu_1", "ORD-1001"))
        .restart()
        .anthropic(anthropic("toolu_2", "ORD-1001"))
        .process("b")
        .gemini(gemini("ORD-1001"))
        .reconcile()
        .process("a")
        .openai(openai("call_4", "ORD-1001"))
        .process("b")
        .openai(openai("call_5", "ORD-1002"))
        .restart()
        .openai(openai("call_6", "ORD-1002"))
        .process("a")
        .openai_responses(
            json!([{"type": "function_call", "id": "fc_7", "call_id": "call_7",
            "name": "refund", "arguments": "{\"order_id\":\"ORD-1002\"}", "status": "completed"}]),
        )
}

#[tokio::test]
async fn a_restart_and_a_second_process_on_the_same_store_keep_each_refund_once() {
    let story = restarts_and_a_second_process();
    let scene = Scene::new(RIGHT).await;
    let played = scene.play(&story).await;

    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 2, "toolu_1"), ("outcome_unknown", false));
    assert_eq!(
        status(&played, 4, "toolu_2"),
        ("outcome_unknown", true),
        "the reopened store remembers"
    );
    assert_eq!(
        status(&played, 6, "gemini_call_0"),
        ("outcome_unknown", true),
        "so does a second process"
    );
    assert_eq!(reconciled(&played, 7), (1, 0, 0));
    assert_eq!(status(&played, 9, "call_4"), ("succeeded", true));
    assert_eq!(status(&played, 11, "call_5"), ("succeeded", false));
    assert_eq!(status(&played, 13, "call_6"), ("succeeded", true));
    assert_eq!(status(&played, 15, "call_7"), ("succeeded", true));
    let processes: Vec<(usize, &str)> = played
        .answers
        .iter()
        .map(|answered| (answered.line, answered.process.as_str()))
        .collect();
    assert_eq!(
        processes,
        [
            (2, "a"),
            (4, "a"),
            (6, "b"),
            (7, "b"),
            (9, "a"),
            (11, "b"),
            (13, "b"),
            (15, "a")
        ]
    );
    assert_eq!(scene.payments.applied().len(), 2);
    assert_eq!(
        scene.posted(),
        2,
        "one request a refund: the store kept each once"
    );
}

#[tokio::test]
async fn a_refused_call_is_checked_by_its_operation_s_key() {
    let story = Story::new().openai(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": 5}"}}]}));
    let scene = Scene::new(RIGHT).await;
    let played = scene.play(&story).await;
    let (_, turn) = played.turns().next().unwrap();
    assert_eq!(
        turn.report("call_1").unwrap().result.error_kind(),
        Some(ErrorKind::InvalidArguments),
        "refused before it ran: `amount` is no argument of the tool"
    );
    played.check(|| scene.payments.applied()).unwrap();

    // Code outside the dispatcher sends the refused refund under its operation's key.
    let key = turn.asked[0]
        .key
        .clone()
        .expect("the arguments are an object");
    let body = json!({"order_id": "ORD-1001"}).to_string();
    let sent = send(
        scene.proxy.addr(),
        request(Method::POST, "/refunds", Some(&key), &body),
        None,
    )
    .await;
    assert_eq!(sent.answer().status(), 200);
    let mut played = played;
    played.requests = scene.proxy.plan().requests();
    let violations = played
        .check(|| scene.payments.applied())
        .unwrap_err()
        .into_vec();
    assert_eq!(
        violations,
        [Violation::RefusedButSent {
            line: 1,
            call_id: "call_1".to_owned(),
            tool: "refund".to_owned(),
            key,
            requests: 1,
            effects: 1,
        }]
    );
}

/// A refund over the approval threshold, decided by a manager, then asked for again.
fn held_then_decided(verdict: fn(Story) -> Story) -> Story {
    let big = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1002\",\"amount\":500}"}}]})
    };
    verdict(
        Story::new()
            .session("acme", "agent", ["refund:create"])
            .openai(big("call_1")),
    )
    .run_approved()
    .openai(big("call_2"))
}

#[tokio::test]
async fn an_approved_refund_runs_once_and_a_rejected_one_never() {
    let approve = held_then_decided(|story| {
        story.approve("manager", ["refund:approve"], "the return arrived")
    });
    let scene = Scene::new(APPROVED).await;
    let played = scene.play(&approve).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 2, "call_1"), ("awaiting_approval", false));
    let answers: Vec<&Answer> = played
        .answers
        .iter()
        .map(|answered| &answered.answer)
        .collect();
    let [_, Answer::Decided(decided), Answer::RanApproved(ran), _] = answers[..] else {
        panic!("{answers:?}");
    };
    assert!(matches!(decided[..], [Decided::Applied(_)]), "{decided:?}");
    assert_eq!(ran.executed.len(), 1, "{ran:?}");
    assert!(ran.executed[0].result.is_succeeded(), "{ran:?}");
    assert_eq!(status(&played, 5, "call_2"), ("succeeded", true));
    assert_eq!(scene.payments.applied().len(), 1);

    let reject =
        held_then_decided(|story| story.reject("manager", ["refund:approve"], "no return"));
    let scene = Scene::new(APPROVED).await;
    let played = scene.play(&reject).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 5, "call_2"), ("rejected", true));
    assert!(scene.payments.applied().is_empty());

    // A manager without the approval permission decides nothing: the refund still waits.
    let refused = held_then_decided(|story| story.approve("manager", ["refund:create"], "why not"));
    let scene = Scene::new(APPROVED).await;
    let played = scene.play(&refused).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 5, "call_2"), ("awaiting_approval", true));
    assert!(scene.payments.applied().is_empty());
}

#[tokio::test]
async fn on_postgres_the_right_tool_keeps_every_promise_and_a_keyless_one_is_caught() {
    let story = Story::from_jsonl(LOST_THEN_ASKED_AGAIN).unwrap();
    let scene = Scene::on(Store::Postgres, RIGHT).await;
    let played = scene.play(&story).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(reconciled(&played, 5), (1, 0, 0));
    assert_eq!(status(&played, 6, "call_3"), ("succeeded", true));
    assert_eq!(scene.payments.applied().len(), 1);

    let scene = Scene::on(Store::Postgres, KEYLESS).await;
    let played = scene.play(&story).await;
    let violations = played
        .check(|| scene.payments.applied())
        .unwrap_err()
        .into_vec();
    let twice = Violation::AppliedMoreThanOnce {
        operation: "refund ORD-1001".to_owned(),
        keys: vec![None, None],
    };
    assert!(violations.contains(&twice), "{violations:#?}");
}

#[tokio::test]
async fn on_postgres_a_restart_and_a_second_process_keep_each_refund_once() {
    let scene = Scene::on(Store::Postgres, RIGHT).await;
    let played = scene.play(&restarts_and_a_second_process()).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(
        status(&played, 6, "gemini_call_0"),
        ("outcome_unknown", true),
        "a second process on the database remembers"
    );
    assert_eq!(scene.payments.applied().len(), 2);
    assert_eq!(scene.posted(), 2, "one request a refund");
}

#[tokio::test]
async fn a_run_line_s_limits_stop_the_run_before_the_provider_is_asked_again() {
    let story = Story::new()
        .run_with_limits("r2", RunLimits::DEFAULT.max_tool_calls(1))
        .openai(openai("call_1", "ORD-1001"))
        .openai(openai("call_2", "ORD-1002"));
    let written = story.to_jsonl();
    assert!(
        written.starts_with(r#"{"run":{"id":"r2","max_steps":50,"max_tool_calls":1,"#),
        "{written}"
    );
    assert_eq!(Story::from_jsonl(&written).unwrap(), story);

    let scene = Scene::new(RIGHT).await;
    let played = scene.play(&story).await;
    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 2, "call_1"), ("succeeded", false));
    assert_eq!(status(&played, 3, "call_2"), ("error", false));
    let (_, second) = played.turns().nth(1).unwrap();
    let kind = second.report("call_2").unwrap().result.error_kind();
    assert_eq!(
        kind,
        Some(ErrorKind::CallBudgetExhausted),
        "over the run's one tool call"
    );
    assert_eq!(scene.posted(), 1, "ORD-1002 was never sent");
}

/// The application's outbox worker on `store`: it posts each refund event to the provider
/// behind `proxy` under the operation's key, gives up on an answer after a second
/// (`outcome_unknown`: the refund may have been applied), and retries at once.
fn worker(store: Arc<dyn OperationStore>, proxy: std::net::SocketAddr) -> OutboxWorker {
    let retry = RetrySpec {
        max_attempts: Some(3),
        base: Some(std::time::Duration::ZERO),
        max: Some(std::time::Duration::ZERO),
        jitter: Some(false),
    };
    OutboxWorker::builder(store)
        .name("worker-1")
        .retry(retry)
        .deliver("refund", move |event: OutboxEvent| async move {
            let payload: Value = serde_json::from_str(&event.payload).unwrap();
            let order = payload["order_id"].as_str().unwrap().to_owned();
            let posted = tools::post_refund_to(proxy, Some(&event.key), &order);
            match tokio::time::timeout(std::time::Duration::from_secs(1), posted).await {
                Ok(answered) => answered,
                Err(_) => Err(ToolError::outcome_unknown(
                    "the provider did not answer in 1 s",
                )),
            }
        })
        .build()
        .unwrap()
}

/// A refund queued for the outbox, whose delivery's answer is lost after the provider applied
/// it, settled by a reconcile pass, and asked for again.
fn queued_then_lost() -> Story {
    Story::new()
        .openai(openai("call_1", "ORD-1001"))
        .fault(Route::post("/refunds"), Fault::DropAfterApply, 1)
        .deliver()
        .reconcile()
        .openai(openai("call_2", "ORD-1001"))
}

/// The scene of `registry`, with the outbox worker posting through its proxy.
pub(super) async fn outbox_scene(registry: fn() -> Registry) -> Scene {
    let mut scene = Scene::new(registry).await;
    let proxy = scene.proxy.addr();
    scene.stage = scene.stage.with_worker(move |store| worker(store, proxy));
    scene
}

/// The report of the story's `deliver` line.
fn delivered(played: &Played) -> toolgate::outbox::DeliveryReport {
    played
        .answers
        .iter()
        .find_map(|answered| match &answered.answer {
            Answer::Delivered(report) => Some(*report),
            _ => None,
        })
        .expect("the deliver line is answered")
}

#[tokio::test]
async fn an_outbox_refund_whose_delivery_answer_is_lost_is_settled_and_applied_once() {
    let story = queued_then_lost();
    assert_eq!(Story::from_jsonl(&story.to_jsonl()).unwrap(), story);
    let scene = outbox_scene(QUEUED).await;
    let played = scene.play(&story).await;

    played.check(|| scene.payments.applied()).unwrap();
    assert_eq!(status(&played, 1, "call_1"), ("queued", false));
    // The worker gives up on the answer: the delivery may have been applied, so it is left
    // to the reconciler, never sent blind again.
    let report = delivered(&played);
    assert_eq!((report.delivered, report.unknown), (0, 1), "{report:?}");
    assert_eq!(
        reconciled(&played, 4),
        (1, 0, 0),
        "the hook found it applied"
    );
    assert_eq!(status(&played, 5, "call_2"), ("succeeded", true));
    assert_eq!(scene.payments.applied().len(), 1, "applied once");
    assert_eq!(scene.posted(), 1);
}

#[tokio::test]
async fn the_same_story_catches_an_outbox_tool_without_a_reconcile_hook() {
    let scene = outbox_scene(QUEUED_UNHOOKED).await;
    let played = scene.play(&queued_then_lost()).await;
    let violations = played
        .check(|| scene.payments.applied())
        .unwrap_err()
        .into_vec();
    assert!(
        matches!(
            violations.as_slice(),
            [Violation::Unaccounted {
                state: Some(OperationState::OutcomeUnknown),
                ..
            }]
        ),
        "{violations:#?}"
    );
}

#[tokio::test]
async fn a_deliver_line_needs_the_stages_worker() {
    let scene = Scene::new(QUEUED).await;
    let story = Story::new().openai(openai("call_1", "ORD-1001")).deliver();
    let refused = play(&scene.stage, &story).await.unwrap_err();
    assert!(
        matches!(refused, PlayError::NoWorker { line: 2 }),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("Stage::with_worker"),
        "{refused}"
    );
}
