//! Multi-step writes on the MemoryStore: each step journaled under the operation, so that a
//! retry after a crash runs only the steps not done, a step that may have acted is never run
//! again (or is checked), and a call that succeeded halfway answers `partial`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::support::session;
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{OperationState, StepStatus};
use toolgate_test::{ManualClock, MemoryStore};

/// The systems the steps act on: how many times each step acted, and where a call stops.
#[derive(Default)]
struct Crm {
    counts: Mutex<BTreeMap<String, u32>>,
    /// A call that reaches this point waits forever (its task is then aborted: a crash).
    hold: Mutex<Option<String>>,
    reached: Notify,
    /// The notification step fails with a 503.
    notify_fails: Mutex<bool>,
    /// The step of this name acts and then loses its answer.
    unknown_at: Mutex<Option<String>>,
    /// What a check of a step that may have acted finds: applied or not.
    check_finds: Mutex<bool>,
}

impl Crm {
    fn count(&self, step: &str) -> u32 {
        self.counts.lock().unwrap().get(step).copied().unwrap_or(0)
    }

    async fn gate(&self, point: &str) {
        if self.hold.lock().unwrap().as_deref() == Some(point) {
            self.reached.notify_one();
            std::future::pending::<()>().await;
        }
    }

    fn hold_at(&self, point: &str) {
        *self.hold.lock().unwrap() = Some(point.to_owned());
    }

    /// The step `name` acts (counted), then maybe stops, then answers.
    async fn act(&self, name: &str) -> Result<String, ToolError> {
        *self
            .counts
            .lock()
            .unwrap()
            .entry(name.to_owned())
            .or_default() += 1;
        self.gate(&format!("inside:{name}")).await;
        if self.unknown_at.lock().unwrap().as_deref() == Some(name) {
            return Err(ToolError::outcome_unknown(format!(
                "{name}: the answer was lost"
            )));
        }
        Ok(format!("{name}-done"))
    }

    async fn notify(&self) -> Result<String, ToolError> {
        *self
            .counts
            .lock()
            .unwrap()
            .entry("notify".to_owned())
            .or_default() += 1;
        if *self.notify_fails.lock().unwrap() {
            return Err(ToolError::unavailable("the mail service answered 503"));
        }
        Ok("sent".to_owned())
    }

    async fn check(&self, name: &str) -> Result<Option<String>, ToolError> {
        let found = *self.check_finds.lock().unwrap();
        Ok(found.then(|| format!("{name}-found")))
    }
}

/// Three steps, each acting once.
#[tool(side_effect = "write", key = [order_id], timeout = "1s")]
async fn three_steps(
    ctx: &Ctx,
    crm: State<Arc<Crm>>,
    order_id: String,
) -> Result<Value, ToolError> {
    let a = ctx.step("a", crm.act("a")).await?;
    let b = ctx.step("b", crm.act("b")).await?;
    crm.gate("before:c").await;
    let c = ctx.step("c", crm.act("c")).await?;
    Ok(json!({"order": order_id, "steps": [a, b, c]}))
}

/// One step that can be checked when it may have acted; its provider honours the key, so an
/// ended lease is taken over.
#[tool(side_effect = "write", key = [order_id], timeout = "1s", honours_key = true)]
async fn checked_step(
    ctx: &Ctx,
    crm: State<Arc<Crm>>,
    order_id: String,
) -> Result<Value, ToolError> {
    let a = ctx
        .step_or_check("a", crm.act("a"), || crm.check("a"))
        .await?;
    Ok(json!({"order": order_id, "a": a}))
}

/// Update the customer's record, then notify them.
#[tool(side_effect = "write", key = [customer], timeout = "1s")]
async fn update_crm_and_notify(
    ctx: &Ctx,
    crm: State<Arc<Crm>>,
    customer: String,
) -> Result<Value, ToolError> {
    let record = ctx.step("update_crm", crm.act("update_crm")).await?;
    let sent = ctx.step("notify", crm.notify()).await?;
    Ok(json!({"customer": customer, "crm": record, "notification": sent}))
}

/// Update the customer's record, then try to notify them, and answer Ok either way.
#[tool(side_effect = "write", key = [customer], timeout = "1s")]
async fn update_and_try_notify(
    ctx: &Ctx,
    crm: State<Arc<Crm>>,
    customer: String,
) -> Result<Value, ToolError> {
    let record = ctx.step("update_crm", crm.act("update_crm")).await?;
    let sent = ctx.step("notify", crm.notify()).await.is_ok();
    Ok(json!({"customer": customer, "crm": record, "notified": sent}))
}

/// Update the customer's record, then refuse when the customer is blocked: an error outside
/// any step, after a step acted.
#[tool(side_effect = "write", key = [customer], timeout = "1s")]
async fn update_then_refuse(
    ctx: &Ctx,
    crm: State<Arc<Crm>>,
    customer: String,
) -> Result<Value, ToolError> {
    let record = ctx.step("update_crm", crm.act("update_crm")).await?;
    if *crm.notify_fails.lock().unwrap() {
        return Err(ToolError::refused(format!("{customer} is blocked")));
    }
    Ok(json!({"customer": customer, "crm": record}))
}

struct Setup {
    dispatcher: Dispatcher,
    crm: Arc<Crm>,
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

fn setup() -> Setup {
    let mut registry = Registry::new();
    registry.register::<three_steps>().unwrap();
    registry.register::<checked_step>().unwrap();
    registry.register::<update_crm_and_notify>().unwrap();
    registry.register::<update_and_try_notify>().unwrap();
    registry.register::<update_then_refuse>().unwrap();
    let crm = Arc::new(Crm::default());
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let dispatcher = Dispatcher::builder(registry)
        .state(crm.clone())
        .store(store.clone())
        .clock(clock.clone())
        .build();
    Setup {
        dispatcher,
        crm,
        store,
        clock,
    }
}

impl Setup {
    async fn call(&self, id: &str, tool: &str, args: Value) -> Value {
        let call = ToolCall::new(id, tool, args);
        self.dispatcher
            .dispatch(&session(), call)
            .await
            .unwrap()
            .result
            .to_json()
    }

    /// Starts the call, waits until it reaches the point the CRM holds it at, and kills it
    /// there; then moves the clock past its lease.
    async fn crash_at(&self, point: &str, tool: &str, args: Value) {
        self.crm.hold_at(point);
        let dispatcher = self.dispatcher.clone();
        let call = ToolCall::new("crashing", tool, args);
        let task = tokio::spawn(async move { dispatcher.dispatch(&session(), call).await });
        self.crm.reached.notified().await;
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        *self.crm.hold.lock().unwrap() = None;
        self.clock.advance_ms(10 * 60 * 1000);
    }

    async fn only_record(&self) -> toolgate::store::OperationRecord {
        let mut records = self
            .store
            .list_operations(Default::default())
            .await
            .unwrap();
        assert_eq!(records.len(), 1, "{records:?}");
        records.remove(0)
    }
}

#[tokio::test(start_paused = true)]
async fn a_crash_after_step_2_of_3_then_a_retry_runs_step_3_only() {
    let setup = setup();
    let args = json!({"order_id": "ORD-7"});
    setup
        .crash_at("before:c", "three_steps", args.clone())
        .await;
    assert_eq!(
        (
            setup.crm.count("a"),
            setup.crm.count("b"),
            setup.crm.count("c")
        ),
        (1, 1, 0)
    );

    let answer = setup.call("c2", "three_steps", args).await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(
        answer["data"]["steps"],
        json!(["a-done", "b-done", "c-done"])
    );
    assert!(
        answer.get("steps").is_none(),
        "a plain success carries no steps"
    );
    assert_eq!(
        (
            setup.crm.count("a"),
            setup.crm.count("b"),
            setup.crm.count("c")
        ),
        (1, 1, 1),
        "each step acted once"
    );
    let record = setup.only_record().await;
    assert_eq!(
        (record.state, record.attempt),
        (OperationState::Succeeded, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_that_began_and_was_never_recorded_is_not_run_again() {
    let setup = setup();
    let args = json!({"order_id": "ORD-8"});
    setup
        .crash_at("inside:b", "three_steps", args.clone())
        .await;

    let answer = setup.call("c2", "three_steps", args.clone()).await;
    assert_eq!(answer["status"], "outcome_unknown", "{answer}");
    let again = setup.call("c3", "three_steps", args).await;
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(
        (
            setup.crm.count("a"),
            setup.crm.count("b"),
            setup.crm.count("c")
        ),
        (1, 1, 0),
        "step b may have acted: never run again"
    );
    let record = setup.only_record().await;
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    let steps = setup
        .store
        .steps(&record.tenant, &record.key)
        .await
        .unwrap();
    let statuses: Vec<_> = steps.iter().map(|s| (s.name.as_str(), s.status)).collect();
    assert_eq!(
        statuses,
        [("a", StepStatus::Succeeded), ("b", StepStatus::Started)]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_step_outcome_is_answered_with_the_steps() {
    let setup = setup();
    *setup.crm.unknown_at.lock().unwrap() = Some("b".to_owned());
    let answer = setup
        .call("c1", "three_steps", json!({"order_id": "ORD-9"}))
        .await;
    assert_eq!(answer["status"], "outcome_unknown", "{answer}");
    let steps = answer["steps"].as_array().expect("the steps reached");
    assert_eq!(steps.len(), 2, "{answer}");
    assert_eq!(
        (steps[0]["name"].as_str(), steps[0]["status"].as_str()),
        (Some("a"), Some("succeeded"))
    );
    assert_eq!(
        (steps[1]["name"].as_str(), steps[1]["status"].as_str()),
        (Some("b"), Some("outcome_unknown"))
    );
    assert_eq!(setup.crm.count("b"), 1, "an unknown outcome is not retried");
}

#[tokio::test(start_paused = true)]
async fn a_checked_step_found_applied_is_not_run_again() {
    let setup = setup();
    let args = json!({"order_id": "ORD-10"});
    setup
        .crash_at("inside:a", "checked_step", args.clone())
        .await;
    *setup.crm.check_finds.lock().unwrap() = true;
    let answer = setup.call("c2", "checked_step", args).await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["data"]["a"], "a-found", "the check's output");
    assert_eq!(setup.crm.count("a"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_checked_step_found_not_applied_runs_again() {
    let setup = setup();
    let args = json!({"order_id": "ORD-11"});
    setup
        .crash_at("inside:a", "checked_step", args.clone())
        .await;
    *setup.crm.check_finds.lock().unwrap() = false;
    let answer = setup.call("c2", "checked_step", args).await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["data"]["a"], "a-done");
    assert_eq!(setup.crm.count("a"), 2, "run again, once");
}

#[tokio::test(start_paused = true)]
async fn the_crm_and_notification_story_answers_partial_until_the_rest_is_done() {
    let setup = setup();
    let args = json!({"customer": "CUS-1"});
    *setup.crm.notify_fails.lock().unwrap() = true;

    let first = setup
        .call("c1", "update_crm_and_notify", args.clone())
        .await;
    assert_eq!(first["status"], "partial", "{first}");
    let steps = first["steps"].as_array().unwrap();
    assert_eq!(steps[0]["name"], "update_crm");
    assert_eq!(steps[0]["status"], "succeeded");
    assert_eq!(steps[0]["output"], "update_crm-done");
    assert_eq!(steps[1]["name"], "notify");
    assert_eq!(steps[1]["status"], "failed");
    assert_eq!(steps[1]["error"]["what"], "the mail service answered 503");
    let error = &first["error"];
    assert_eq!(error["kind"], "unavailable");
    let what = error["what"].as_str().unwrap();
    assert!(
        what.contains("update_crm succeeded") && what.contains("notify failed"),
        "{what}"
    );
    let next = error["next"].as_str().unwrap();
    assert!(
        next.contains("update_crm is done and is not run again"),
        "{next}"
    );
    assert!(next.contains("only notify runs again"), "{next}");
    assert_eq!(setup.crm.count("update_crm"), 1);
    assert_eq!(setup.only_record().await.state, OperationState::Partial);

    // The same call again, while the notification still fails: partial again, the CRM not
    // touched.
    let second = setup
        .call("c2", "update_crm_and_notify", args.clone())
        .await;
    assert_eq!(second["status"], "partial", "{second}");
    assert_eq!(second["steps"][0]["replayed"], true);
    assert_eq!(setup.crm.count("update_crm"), 1);
    let notified = setup.crm.count("notify");

    *setup.crm.notify_fails.lock().unwrap() = false;
    let third = setup.call("c3", "update_crm_and_notify", args).await;
    assert_eq!(third["status"], "succeeded", "{third}");
    assert_eq!(third["data"]["crm"], "update_crm-done");
    assert_eq!(third["data"]["notification"], "sent");
    assert_eq!(setup.crm.count("update_crm"), 1, "the CRM was updated once");
    assert_eq!(setup.crm.count("notify"), notified + 1);
    assert_eq!(setup.only_record().await.state, OperationState::Succeeded);
}

#[tokio::test(start_paused = true)]
async fn a_failed_step_the_tool_swallowed_still_answers_partial() {
    let setup = setup();
    *setup.crm.notify_fails.lock().unwrap() = true;
    let answer = setup
        .call("c1", "update_and_try_notify", json!({"customer": "CUS-2"}))
        .await;
    assert_eq!(answer["status"], "partial", "{answer}");
    assert_eq!(answer["steps"][1]["status"], "failed");
    assert!(answer.get("data").is_none(), "never a success");
    assert_eq!(setup.only_record().await.state, OperationState::Partial);
}

/// A tool that fails outside any step after a step succeeded has acted: `partial`, naming the
/// step done and the rest that failed, never `failed`; the same call again does not redo the
/// step.
#[tokio::test(start_paused = true)]
async fn an_error_after_a_succeeded_step_is_partial_not_failed() {
    let setup = setup();
    *setup.crm.notify_fails.lock().unwrap() = true;
    let args = json!({"customer": "CUS-3"});
    let answer = setup.call("c1", "update_then_refuse", args.clone()).await;
    assert_eq!(answer["status"], "partial", "{answer}");
    assert_eq!(answer["steps"][0]["name"], "update_crm");
    assert_eq!(answer["steps"][0]["status"], "succeeded");
    assert_eq!(answer["steps"][1]["name"], "rest of update_then_refuse");
    assert_eq!(answer["steps"][1]["status"], "failed");
    assert_eq!(answer["steps"][1]["error"]["kind"], "refused");
    assert_eq!(setup.only_record().await.state, OperationState::Partial);
    *setup.crm.notify_fails.lock().unwrap() = false;
    let again = setup.call("c2", "update_then_refuse", args).await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(
        setup.crm.count("update_crm"),
        1,
        "the step done is not redone"
    );
}
