//! Human approval over a threshold, on every store: a call over it waits and does not run, a
//! duplicate answers the same approval, decisions follow their rules, an approved operation runs
//! once (the model's call again or the runner, whichever comes first) after the checks are made
//! again, and every call and decision lands in the audit trail.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate::dispatch::{Clock, ManualClock, PermissionSource};
use toolgate::identity::Operator;
use toolgate::prelude::*;
use toolgate::store::{
    AbortRequest, ApprovalQuery, ApprovalStatus, AuditKind, AuditQuery, DecideRequest, Decided,
    OperationState, OperationStore, Refusal, Verdict,
};
use toolgate_test::MemoryStore;

const NOW: i64 = 1_700_000_000_000;

/// How many refunds ran, and on what; and the most a refund may be now (the business rule).
#[derive(Default)]
struct Provider {
    /// Told when a write of the turn reached its claim (see `forbidden_lookup`).
    at_claim: tokio::sync::Notify,
    runs: AtomicU32,
    applied: Mutex<Vec<(String, f64)>>,
    limit: Mutex<Option<f64>>,
}

/// The business check: the amount is within the provider's limit now.
async fn within_limit(ctx: &Ctx, amount: f64) -> Result<(), ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    match *provider.limit.lock().unwrap() {
        Some(limit) if amount > limit => Err(ToolError::refused(format!(
            "a refund of {amount} is over the limit"
        ))
        .with_why(format!("at most {limit} may be refunded now"))),
        _ => Ok(()),
    }
}

/// Refund an order, within the provider's limit.
#[tool(side_effect = "write", permission = "refund:create", approval_over = 5000,
       approver = "refund:approve", key = [order_id], check = within_limit(ctx, amount))]
async fn checked_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    refund(ctx, order_id, amount).await
}

/// Look an order up.
#[tool]
async fn lookup(order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: paid"))
}

/// Refund an order.
#[tool(side_effect = "write", permission = "refund:create", approval_over = 5000, key = [order_id])]
async fn refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    provider.runs.fetch_add(1, Ordering::SeqCst);
    provider
        .applied
        .lock()
        .unwrap()
        .push((order_id.clone(), amount));
    Ok(json!({"order_id": order_id, "amount": amount}))
}

/// Pay an order by card.
#[tool(side_effect = "write", permission = "refund:create", approval_over = 5000, key = [order_id])]
async fn pay(
    ctx: &Ctx,
    order_id: String,
    amount: f64,
    #[sensitive] card: String,
) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    provider.runs.fetch_add(1, Ordering::SeqCst);
    assert_eq!(card, SECRET, "the tool gets the card the model sent");
    Ok(json!({"order_id": order_id, "amount": amount}))
}

const SECRET: &str = "4111-1111-1111-1111";

/// An amount in cents, compared in units.
#[derive(Debug, Clone, Copy, serde::Deserialize, schemars::JsonSchema)]
struct Cents(u64);

impl toolgate::approval::ApprovalAmount for Cents {
    fn approval_amount(&self) -> f64 {
        self.0 as f64 / 100.0
    }
}

/// Refund an order, in cents.
#[tool(side_effect = "write", approval_over = 500, key = [order_id])]
async fn refund_cents(ctx: &Ctx, order_id: String, amount: Cents) -> Result<Value, ToolError> {
    refund(ctx, order_id, amount.0 as f64).await
}

/// A refund asked as one struct.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct RefundRequest {
    /// The order.
    order_id: String,
    /// The amount, in units.
    total: f64,
}

/// Refund an order, asked as one struct.
#[tool(side_effect = "write", approval_over = 5000, approval_field = total, key = [order_id])]
async fn refund_request(ctx: &Ctx, Args(request): Args<RefundRequest>) -> Result<Value, ToolError> {
    refund(ctx, request.order_id, request.total).await
}

/// The same tool with a higher threshold: another policy.
mod v2 {
    use super::*;

    /// Refund an order.
    #[tool(name = "refund", side_effect = "write", permission = "refund:create", approval_over = 9000, key = [order_id])]
    pub(crate) async fn refund_v2(
        ctx: &Ctx,
        order_id: String,
        amount: f64,
    ) -> Result<Value, ToolError> {
        super::refund(ctx, order_id, amount).await
    }
}

/// The same tool whose schema no longer admits the amount that was approved.
mod v3 {
    use super::*;

    /// Refund an order.
    #[tool(name = "refund", side_effect = "write", permission = "refund:create", approval_over = 5000, key = [order_id])]
    pub(crate) async fn refund_v3(
        ctx: &Ctx,
        order_id: String,
        #[schemars(range(max = 7000))] amount: f64,
    ) -> Result<Value, ToolError> {
        super::refund(ctx, order_id, amount).await
    }
}

struct Rig {
    store: Arc<dyn OperationStore>,
    clock: Arc<ManualClock>,
    provider: Arc<Provider>,
    dispatcher: Dispatcher,
}

fn dispatcher(
    store: &Arc<dyn OperationStore>,
    clock: &Arc<ManualClock>,
    provider: &Arc<Provider>,
    registry: Registry,
    source: Option<Revoked>,
) -> Dispatcher {
    let mut builder = Dispatcher::builder(registry)
        .store(store.clone())
        .clock(clock.clone())
        .state(provider.clone());
    if let Some(source) = source {
        builder = builder.permission_source(source);
    }
    builder.build()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    registry.register::<pay>().unwrap();
    registry.register::<checked_refund>().unwrap();
    registry.register::<lookup>().unwrap();
    registry
}

impl Rig {
    fn new(store: Arc<dyn OperationStore>) -> Rig {
        let clock = Arc::new(ManualClock::new(NOW));
        let provider = Arc::new(Provider::default());
        let dispatcher = dispatcher(&store, &clock, &provider, registry(), None);
        Rig {
            store,
            clock,
            provider,
            dispatcher,
        }
    }

    /// The same store and provider, another dispatcher (another process, after a restart).
    fn with(&self, registry: Registry, source: Option<Revoked>) -> Dispatcher {
        dispatcher(&self.store, &self.clock, &self.provider, registry, source)
    }

    fn runs(&self) -> u32 {
        self.provider.runs.load(Ordering::SeqCst)
    }
}

fn agent() -> Session {
    Session::new(
        crate::support::agent().with_permissions(["refund:create"]),
        "run-1",
    )
}

fn manager() -> Operator {
    toolgate_test::operator("acme", "manager", &["refund:approve", "pay:approve"])
}

async fn call(dispatcher: &Dispatcher, id: &str, order_id: &str, amount: f64) -> CallResult {
    let call = ToolCall::new(
        id,
        "refund",
        json!({"order_id": order_id, "amount": amount}),
    );
    dispatcher.dispatch(&agent(), call).await.unwrap().result
}

async fn decide(
    store: &dyn OperationStore,
    id: &str,
    approver: &Operator,
    verdict: Verdict,
    now_ms: i64,
) -> Decided {
    let request = DecideRequest {
        id,
        approver,
        verdict,
        reason: "checked with the customer",
        now_ms,
    };
    toolgate::approval::decide(store, request).await.unwrap()
}

fn approval_id(result: &CallResult) -> String {
    result
        .explanation()
        .and_then(|e| e.approval_id.clone())
        .unwrap_or_else(|| panic!("no approval in {}", result.to_json_string()))
}

/// Revokes `refund:create` from everyone.
struct Revoked;

#[async_trait::async_trait]
impl PermissionSource for Revoked {
    async fn permissions(
        &self,
        _tenant: &str,
        _user: &str,
    ) -> Result<Option<Vec<String>>, ToolError> {
        Ok(Some(vec!["orders:read".to_owned()]))
    }
}

async fn over_the_threshold_waits_and_a_duplicate_answers_the_same_approval(
    store: Arc<dyn OperationStore>,
) {
    let rig = Rig::new(store);
    let first = call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await;
    assert_eq!(
        first.status,
        Status::AwaitingApproval,
        "{}",
        first.to_json_string()
    );
    assert!(!first.replayed);
    let id = approval_id(&first);
    let expires = first.explanation().unwrap().expires_at_ms.unwrap();
    assert_eq!(expires, NOW + 24 * 60 * 60 * 1000);
    assert_eq!(rig.runs(), 0, "nothing runs before a decision");
    // The same call again: the same approval, never a second.
    let again = call(&rig.dispatcher, "call_2", "ORD-1", 8000.0).await;
    assert_eq!(again.status, Status::AwaitingApproval);
    assert!(again.replayed);
    assert_eq!(approval_id(&again), id);
    let waiting = rig
        .store
        .list_approvals(ApprovalQuery {
            tenant: Some("acme"),
            ..ApprovalQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].requester.user, "agent");
    assert_eq!(waiting[0].approver_permission, "refund:approve");
    // Other arguments under the key: a conflict, and nothing stored for them.
    let other = call(&rig.dispatcher, "call_3", "ORD-1", 7000.0).await;
    assert_eq!(
        other.error_kind(),
        Some(ErrorKind::Conflict),
        "{}",
        other.to_json_string()
    );
    // Under the threshold: runs at once.
    let small = call(&rig.dispatcher, "call_4", "ORD-2", 500.0).await;
    assert_eq!(small.status, Status::Succeeded);
    assert_eq!(rig.runs(), 1);
}

async fn a_waiting_call_does_not_hold_back_its_turn(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let calls = vec![
        ToolCall::new(
            "a",
            "refund",
            json!({"order_id": "ORD-1", "amount": 8000.0}),
        ),
        ToolCall::new("b", "refund", json!({"order_id": "ORD-2", "amount": 100.0})),
    ];
    let reports = rig.dispatcher.dispatch_turn(&agent(), calls).await.unwrap();
    assert_eq!(reports[0].result.status, Status::AwaitingApproval);
    assert_eq!(reports[1].result.status, Status::Succeeded);
    assert_eq!(rig.runs(), 1);
}

async fn decisions_follow_their_rules(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    let store = &*rig.store;
    let requester = toolgate_test::operator("acme", "agent", &["refund:approve"]);
    let other_tenant = toolgate_test::operator("globex", "manager", &["refund:approve"]);
    let clerk = toolgate_test::operator("acme", "clerk", &["refund:create"]);
    for (approver, refusal) in [
        (&requester, Refusal::SelfDecision),
        (&other_tenant, Refusal::NotFound),
        (&clerk, Refusal::MissingPermission),
    ] {
        match decide(store, &id, approver, Verdict::Approve, NOW).await {
            Decided::Refused {
                refusal: got,
                approval,
            } => {
                assert_eq!(got, refusal);
                assert_eq!(approval.is_none(), refusal == Refusal::NotFound);
            }
            other => panic!("{} decided: {other:?}", approver.subject()),
        }
    }
    let approval = store.approval(&id).await.unwrap().unwrap();
    assert_eq!(
        approval.status,
        ApprovalStatus::Pending,
        "refusals change nothing"
    );
    assert!(approval.decisions.is_empty());
    // Rejected: the model's call again reads the rejection, and nothing runs.
    let Decided::Applied(rejected) = decide(store, &id, &manager(), Verdict::Reject, NOW).await
    else {
        panic!("the manager may reject");
    };
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    assert_eq!(rejected.decisions[0].by, "manager");
    let again = call(&rig.dispatcher, "call_2", "ORD-1", 8000.0).await;
    assert_eq!(again.status, Status::Rejected, "{}", again.to_json_string());
    assert!(
        again
            .explanation()
            .unwrap()
            .why
            .as_deref()
            .unwrap()
            .contains("manager rejected it")
    );
    // Decided once: a second decision is refused.
    assert!(matches!(
        decide(store, &id, &manager(), Verdict::Approve, NOW).await,
        Decided::Refused {
            refusal: Refusal::AlreadyDecided,
            ..
        }
    ));
    assert_eq!(rig.runs(), 0);
}

async fn an_expired_approval_is_rejected(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    rig.clock.advance_ms(24 * 60 * 60 * 1000);
    let late = decide(
        &*rig.store,
        &id,
        &manager(),
        Verdict::Approve,
        rig.clock.now_ms(),
    )
    .await;
    let Decided::Refused {
        refusal: Refusal::Expired,
        approval: Some(expired),
    } = late
    else {
        panic!("{late:?}");
    };
    assert_eq!(expired.status, ApprovalStatus::Rejected);
    assert_eq!(expired.decisions[0].reason, "expired");
    let again = call(&rig.dispatcher, "call_2", "ORD-1", 8000.0).await;
    assert_eq!(again.status, Status::Rejected);
    assert!(
        again
            .explanation()
            .unwrap()
            .why
            .as_deref()
            .unwrap()
            .contains("expired")
    );
    let record = rig.store.get("acme", &expired.key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Rejected);
    assert_eq!(rig.runs(), 0);
}

async fn the_runner_expires_what_nobody_decided(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    rig.clock.advance_ms(24 * 60 * 60 * 1000 - 1);
    let pass = rig.dispatcher.run_approved(10).await.unwrap();
    assert!(pass.expired.is_empty() && pass.executed.is_empty());
    rig.clock.advance_ms(1);
    let pass = rig.dispatcher.run_approved(10).await.unwrap();
    assert_eq!(pass.expired.len(), 1);
    assert_eq!(pass.expired[0].id, id);
    let decisions = audit_of(&rig, AuditKind::Decision).await;
    assert_eq!(
        decisions,
        vec![("rejected".to_owned(), "toolgate".to_owned())]
    );
}

async fn an_approved_call_runs_once_at_the_models_next_call(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    assert!(matches!(
        decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await,
        Decided::Applied(_)
    ));
    let ran = call(&rig.dispatcher, "call_2", "ORD-1", 8000.0).await;
    assert_eq!(ran.status, Status::Succeeded, "{}", ran.to_json_string());
    assert!(!ran.replayed);
    let replay = call(&rig.dispatcher, "call_3", "ORD-1", 8000.0).await;
    assert!(replay.is_succeeded() && replay.replayed);
    let pass = rig.dispatcher.run_approved(10).await.unwrap();
    assert!(pass.executed.is_empty(), "nothing left to run");
    assert_eq!(rig.runs(), 1);
}

async fn the_runner_runs_an_approved_operation_once(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    // Another process runs it: a new dispatcher on the same store.
    let other = rig.with(registry(), None);
    let pass = other.run_approved(10).await.unwrap();
    assert_eq!(pass.executed.len(), 1);
    assert_eq!(pass.executed[0].result.status, Status::Succeeded);
    assert_eq!(other.run_approved(10).await.unwrap().executed.len(), 0);
    let replay = call(&rig.dispatcher, "call_2", "ORD-1", 8000.0).await;
    assert!(
        replay.is_succeeded() && replay.replayed,
        "{}",
        replay.to_json_string()
    );
    assert_eq!(rig.runs(), 1);
    assert_eq!(
        rig.provider.applied.lock().unwrap().clone(),
        vec![("ORD-1".to_owned(), 8000.0)]
    );
}

async fn revalidation_rejects_a_revoked_permission(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    let revoked = rig.with(registry(), Some(Revoked));
    let pass = revoked.run_approved(10).await.unwrap();
    let result = &pass.executed[0].result;
    assert_eq!(
        result.status,
        Status::Rejected,
        "{}",
        result.to_json_string()
    );
    assert!(
        result
            .explanation()
            .unwrap()
            .why
            .as_deref()
            .unwrap()
            .contains("no longer holds")
    );
    let approval = rig.store.approval(&id).await.unwrap().unwrap();
    assert_eq!(approval.status, ApprovalStatus::Rejected);
    assert_eq!(
        approval.decisions.len(),
        2,
        "the approval, then the rejection"
    );
    assert_eq!(rig.runs(), 0);
}

async fn revalidation_rejects_a_changed_policy(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    let mut changed = Registry::new();
    changed.register::<v2::refund_v2>().unwrap();
    let redeployed = rig.with(changed, None);
    let result = call(&redeployed, "call_2", "ORD-1", 8000.0).await;
    assert_eq!(
        result.status,
        Status::Rejected,
        "{}",
        result.to_json_string()
    );
    assert!(
        result
            .explanation()
            .unwrap()
            .why
            .as_deref()
            .unwrap()
            .contains("policy")
    );
    assert_eq!(rig.runs(), 0);
}

async fn revalidation_rejects_arguments_the_schema_no_longer_admits(
    store: Arc<dyn OperationStore>,
) {
    let rig = Rig::new(store);
    let id = approval_id(&call(&rig.dispatcher, "call_1", "ORD-1", 8000.0).await);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    let mut changed = Registry::new();
    changed.register::<v3::refund_v3>().unwrap();
    let pass = rig.with(changed, None).run_approved(10).await.unwrap();
    let result = &pass.executed[0].result;
    assert_eq!(
        result.status,
        Status::Rejected,
        "{}",
        result.to_json_string()
    );
    let why = result.explanation().unwrap().why.clone().unwrap();
    assert!(why.contains("no longer match the tool's schema"), "{why}");
    assert_eq!(rig.runs(), 0);
}

async fn revalidation_rejects_what_the_check_refuses_now(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let ask = |id: &str| {
        ToolCall::new(
            id,
            "checked_refund",
            json!({"order_id": "ORD-1", "amount": 8000.0}),
        )
    };
    // The check refuses before anything is stored.
    *rig.provider.limit.lock().unwrap() = Some(100.0);
    let over = json!({"order_id": "ORD-1", "amount": 8000.5});
    let over = ToolCall::new("c0", "checked_refund", over);
    let refused = rig
        .dispatcher
        .dispatch(&agent(), over)
        .await
        .unwrap()
        .result;
    assert_eq!(
        refused.error_kind(),
        Some(ErrorKind::Refused),
        "{}",
        refused.to_json_string()
    );
    let listed = rig.store.list_operations(Default::default()).await.unwrap();
    assert!(
        listed.is_empty(),
        "a refused check stores nothing: {listed:?}"
    );
    // Within the limit it waits; the limit drops while it waits; the run is rejected.
    *rig.provider.limit.lock().unwrap() = Some(10_000.0);
    let waiting = rig
        .dispatcher
        .dispatch(&agent(), ask("c1"))
        .await
        .unwrap()
        .result;
    let id = approval_id(&waiting);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    *rig.provider.limit.lock().unwrap() = Some(7_900.0);
    let again = rig
        .dispatcher
        .dispatch(&agent(), ask("c2"))
        .await
        .unwrap()
        .result;
    assert_eq!(again.status, Status::Rejected, "{}", again.to_json_string());
    let why = again.explanation().unwrap().why.clone().unwrap();
    assert!(why.contains("at most 7900 may be refunded now"), "{why}");
    let approval = rig.store.approval(&id).await.unwrap().unwrap();
    assert_eq!(approval.status, ApprovalStatus::Rejected);
    assert_eq!(rig.runs(), 0);
}

async fn the_audit_trail_matches_the_calls(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let read = ToolCall::new("c0", "lookup", json!({"order_id": "ORD-1"}));
    assert!(
        rig.dispatcher
            .dispatch(&agent(), read)
            .await
            .unwrap()
            .result
            .is_succeeded()
    );
    let outcomes = [
        call(&rig.dispatcher, "c1", "ORD-1", 100.0).await,
        call(&rig.dispatcher, "c2", "ORD-1", 100.0).await,
        call(&rig.dispatcher, "c3", "ORD-1", -1.0).await,
        call(&rig.dispatcher, "c4", "ORD-2", 9000.0).await,
    ];
    let id = approval_id(&outcomes[3]);
    // The requester's own attempt to approve is refused, and audited.
    let requester = toolgate_test::operator("acme", "agent", &["refund:approve"]);
    let own = decide(&*rig.store, &id, &requester, Verdict::Approve, NOW).await;
    assert!(matches!(own, Decided::Refused { .. }), "{own:?}");
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    let ran = call(&rig.dispatcher, "c5", "ORD-2", 9000.0).await;
    let records = rig
        .store
        .audit(AuditQuery {
            run_id: Some("run-1"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let calls: Vec<_> = records
        .iter()
        .filter(|r| r.entry.kind == AuditKind::Call)
        .map(|r| {
            (
                r.entry.call_id.as_str(),
                r.entry.outcome.as_str(),
                r.entry.replayed,
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("c0", "succeeded", false),
            ("c1", "succeeded", false),
            ("c2", "succeeded", true),
            ("c3", "error", false),
            ("c4", "awaiting_approval", false),
            ("c5", "succeeded", false),
        ]
    );
    assert!(ran.is_succeeded());
    let read = &records[0].entry;
    assert_eq!(
        (read.attempts, read.key.as_deref()),
        (1, None),
        "a read has no key"
    );
    assert_eq!(read.arguments, r#"{"order_id":"ORD-1"}"#);
    let first = &records[1].entry;
    assert_eq!(first.attempts, 1);
    assert_eq!(first.actor, "agent");
    assert!(first.key.is_some());
    assert!(first.bytes > 0);
    assert_eq!(records[2].entry.attempts, 0, "a replay runs nothing");
    assert_eq!(records[3].entry.error_kind.as_deref(), Some("conflict"));
    let decisions: Vec<_> = records
        .iter()
        .filter(|r| r.entry.kind == AuditKind::Decision)
        .map(|r| (r.entry.outcome.as_str(), r.entry.actor.as_str()))
        .collect();
    assert_eq!(
        decisions,
        vec![("refused", "agent"), ("approved", "manager")]
    );
    let with_approval = records
        .iter()
        .filter(|r| r.entry.approval_id.as_deref() == Some(id.as_str()))
        .count();
    assert_eq!(
        with_approval, 4,
        "the asking call, the refused attempt, the decision and the run"
    );
}

async fn a_sensitive_argument_is_never_stored(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let args = json!({"order_id": "ORD-1", "amount": 8000.0, "card": SECRET});
    let asked = ToolCall::new("c1", "pay", args.clone());
    let waiting = rig
        .dispatcher
        .dispatch(&agent(), asked)
        .await
        .unwrap()
        .result;
    let id = approval_id(&waiting);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    // The runner cannot run it: the card is not stored. The model's call can.
    let pass = rig.dispatcher.run_approved(10).await.unwrap();
    assert_eq!(pass.executed[0].result.status, Status::AwaitingApproval);
    assert_eq!(rig.runs(), 0);
    let again = ToolCall::new("c2", "pay", args);
    let ran = rig
        .dispatcher
        .dispatch(&agent(), again)
        .await
        .unwrap()
        .result;
    assert!(ran.is_succeeded(), "{}", ran.to_json_string());
    assert_eq!(rig.runs(), 1);
    let approval = rig.store.approval(&id).await.unwrap().unwrap();
    let record = rig.store.get("acme", &approval.key).await.unwrap().unwrap();
    let audit = rig.store.audit(AuditQuery::default()).await.unwrap();
    let mut stored = vec![approval.arguments.clone(), record.arguments.clone()];
    stored.extend(audit.iter().map(|r| r.entry.arguments.clone()));
    assert_eq!(
        audit.len(),
        3,
        "two calls and a decision; the runner ran nothing"
    );
    for text in stored {
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains(r#""card":"[redacted]""#), "{text}");
    }
}

async fn audit_of(rig: &Rig, kind: AuditKind) -> Vec<(String, String)> {
    rig.store
        .audit(AuditQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.kind == kind)
        .map(|r| (r.entry.outcome, r.entry.actor))
        .collect()
}

macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name(std::sync::Arc::new(super::MemoryStore::new())).await;
            })*
        }
        mod sqlite {
            $(#[tokio::test]
            async fn $name() {
                let (store, _dir) = crate::support::stores::sqlite().await;
                super::$name(store).await;
            })*
        }
        mod postgres {
            $(#[tokio::test]
            async fn $name() {
                super::$name(crate::support::stores::postgres().await).await;
            })*
        }
    };
}

on_every_store!(
    over_the_threshold_waits_and_a_duplicate_answers_the_same_approval,
    a_waiting_call_does_not_hold_back_its_turn,
    decisions_follow_their_rules,
    an_expired_approval_is_rejected,
    the_runner_expires_what_nobody_decided,
    an_approved_call_runs_once_at_the_models_next_call,
    the_runner_runs_an_approved_operation_once,
    revalidation_rejects_a_revoked_permission,
    revalidation_rejects_a_changed_policy,
    the_audit_trail_matches_the_calls,
    a_sensitive_argument_is_never_stored,
    revalidation_rejects_arguments_the_schema_no_longer_admits,
    revalidation_rejects_what_the_check_refuses_now,
    an_aborted_runs_approvals_are_rejected_and_never_run,
    an_approval_the_abort_missed_is_rejected_before_it_runs,
);

/// The amount compares as its own type says: cents in units, a struct's field by name.
#[tokio::test]
async fn the_amount_is_read_through_its_own_type() {
    let rig = Rig::new(Arc::new(MemoryStore::new()));
    let mut registry = Registry::new();
    registry.register::<refund_cents>().unwrap();
    registry.register::<refund_request>().unwrap();
    let typed = rig.with(registry, None);
    let run = |id: &str, tool: &str, args: Value| {
        let call = ToolCall::new(id, tool, args);
        let typed = typed.clone();
        async move { typed.dispatch(&agent(), call).await.unwrap().result }
    };
    // 1050 cents are 10.50: under 500.
    let small = run(
        "c1",
        "refund_cents",
        json!({"order_id": "ORD-1", "amount": 1050}),
    )
    .await;
    assert_eq!(
        small.status,
        Status::Succeeded,
        "{}",
        small.to_json_string()
    );
    // 60000 cents are 600.00: over 500.
    let big = run(
        "c2",
        "refund_cents",
        json!({"order_id": "ORD-2", "amount": 60000}),
    )
    .await;
    assert_eq!(
        big.status,
        Status::AwaitingApproval,
        "{}",
        big.to_json_string()
    );
    assert!(
        big.explanation()
            .unwrap()
            .what
            .contains("its amount 600 is over 500")
    );
    let structured = json!({"order_id": "ORD-3", "total": 9000.0});
    let held = run("c3", "refund_request", structured).await;
    assert_eq!(
        held.status,
        Status::AwaitingApproval,
        "{}",
        held.to_json_string()
    );
    assert_eq!(rig.runs(), 1);
}

/// The tool's description tells the model that a call over the threshold waits: the call it
/// speaks of does wait, and one at the threshold runs.
#[tokio::test]
async fn the_description_says_what_a_call_over_the_threshold_does() {
    let rig = Rig::new(Arc::new(MemoryStore::new()));
    let registry = registry();
    let description = registry
        .get("refund")
        .unwrap()
        .descriptor()
        .model_description();
    let promise = "A call whose `amount` is over 5000 waits for a human approval before it runs";
    assert!(description.contains(promise), "{description}");
    let over = call(&rig.dispatcher, "c1", "ORD-1", 5000.01).await;
    assert_eq!(
        over.status,
        Status::AwaitingApproval,
        "{}",
        over.to_json_string()
    );
    assert!(over.explanation().unwrap().approval_id.is_some());
    let at = call(&rig.dispatcher, "c2", "ORD-2", 5000.0).await;
    assert_eq!(at.status, Status::Succeeded, "{}", at.to_json_string());
    assert_eq!(rig.runs(), 1);
}

/// An approval asked by a process that then stops is decided and run by a process started
/// afterwards on the same file.
#[tokio::test]
async fn an_approval_outlives_the_process_that_asked_for_it() {
    use toolgate::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("operations.db");
    let provider = Arc::new(Provider::default());
    let clock = Arc::new(ManualClock::new(NOW));
    let id = {
        let store = SqliteStore::open(&file).await.unwrap();
        let shared: Arc<dyn OperationStore> = Arc::new(store.clone());
        let first = dispatcher(&shared, &clock, &provider, registry(), None);
        let id = approval_id(&call(&first, "call_1", "ORD-1", 8000.0).await);
        drop(first);
        store.close().await;
        id
    };
    let reopened: Arc<dyn OperationStore> = Arc::new(SqliteStore::open(&file).await.unwrap());
    let waiting = reopened.approval(&id).await.unwrap().unwrap();
    assert_eq!(waiting.status, ApprovalStatus::Pending);
    decide(&*reopened, &id, &manager(), Verdict::Approve, NOW).await;
    let second = dispatcher(&reopened, &clock, &provider, registry(), None);
    let pass = second.run_approved(10).await.unwrap();
    assert_eq!(pass.executed.len(), 1);
    assert!(pass.executed[0].result.is_succeeded());
    assert_eq!(provider.runs.load(Ordering::SeqCst), 1);
}

/// The model's call again and the runner of another process race for an approved operation on
/// one PostgreSQL database, through two stores (two pools): it runs once, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_call_and_the_runner_race_and_it_runs_once() {
    use toolgate::store::PostgresStore;
    let url = toolgate_test_postgres::test_database().await;
    let model_side: Arc<dyn OperationStore> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let runner_side: Arc<dyn OperationStore> =
        Arc::new(PostgresStore::connect(&url).await.unwrap());
    let provider = Arc::new(Provider::default());
    let clock = Arc::new(ManualClock::new(NOW));
    let model = dispatcher(&model_side, &clock, &provider, registry(), None);
    let runner = dispatcher(&runner_side, &clock, &provider, registry(), None);
    const ROUNDS: usize = 8;
    for round in 0..ROUNDS {
        let order = format!("ORD-{round}");
        let id = approval_id(&call(&model, "ask", &order, 8000.0).await);
        decide(&*runner_side, &id, &manager(), Verdict::Approve, NOW).await;
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let again = {
            let (model, start, order) = (model.clone(), start.clone(), order.clone());
            tokio::spawn(async move {
                start.wait().await;
                call(&model, "again", &order, 8000.0).await
            })
        };
        let pass = {
            let (runner, start) = (runner.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                runner.run_approved(10).await.unwrap()
            })
        };
        let (again, pass) = (again.await.unwrap(), pass.await.unwrap());
        // Whoever lost reads the winner's outcome, or that it is running now.
        assert!(
            matches!(again.status, Status::Succeeded | Status::InProgress),
            "{}",
            again.to_json_string()
        );
        for done in &pass.executed {
            assert!(
                matches!(done.result.status, Status::Succeeded | Status::InProgress),
                "{}",
                done.result.to_json_string()
            );
        }
        assert_eq!(
            provider.runs.load(Ordering::SeqCst) as usize,
            round + 1,
            "round {round}: run once"
        );
    }
    let applied = provider.applied.lock().unwrap().len();
    assert_eq!(applied, ROUNDS);
}

/// Refund an order, deduplicated across the tenant's runs.
#[tool(name = "tenant_refund", side_effect = "write", permission = "refund:create",
       approval_over = 5000, approver = "refund:approve", key = [order_id], key_scope = "tenant")]
async fn tenant_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    refund(ctx, order_id, amount).await
}

/// Refund an order, deduplicated within one run only.
#[tool(name = "run_refund", side_effect = "write", permission = "refund:create",
       approval_over = 5000, approver = "refund:approve", key = [order_id], key_scope = "run")]
async fn run_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    refund(ctx, order_id, amount).await
}

/// Close a customer's account: a permission the agent does not hold.
#[tool(side_effect = "destructive", permission = "accounts:close", key = [account_id])]
async fn close_account(account_id: String) -> Result<String, ToolError> {
    Ok(format!("{account_id}: closed"))
}

/// Refund an order through the outbox, deduplicated across the tenant's runs.
#[tool(name = "outbox_refund", side_effect = "write", delivery = "outbox",
       approval_over = 5000, approver = "refund:approve", key = [order_id], key_scope = "tenant")]
async fn outbox_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"order_id": order_id, "amount": amount}))
}

fn scoped_registry() -> Registry {
    let mut registry = Registry::new();
    registry.register::<outbox_refund>().unwrap();
    registry.register::<tenant_refund>().unwrap();
    registry.register::<run_refund>().unwrap();
    registry.register::<close_account>().unwrap();
    registry
}

fn agent_in(run_id: &str) -> Session {
    Session::new(
        crate::support::agent().with_permissions(["refund:create"]),
        run_id,
    )
}

async fn ask_in(
    dispatcher: &Dispatcher,
    run_id: &str,
    call_id: &str,
    tool: &str,
    order_id: &str,
) -> CallResult {
    let call = ToolCall::new(
        call_id,
        tool,
        json!({"order_id": order_id, "amount": 8000.0}),
    );
    match dispatcher.dispatch(&agent_in(run_id), call).await {
        Ok(report) => report.result,
        Err(aborted) => panic!("{run_id} is aborted: {aborted:?}"),
    }
}

/// A store, and how to reach the same operations from a new process.
type Reopen =
    Box<dyn Fn() -> futures_util::future::LocalBoxFuture<'static, Arc<dyn OperationStore>>>;

/// The same call after a restart (a new dispatcher on a new connection to the same store) finds
/// the approval it asked for, waiting or decided: in the same run, and in a new run when the
/// tool's key is the tenant's. Nothing is asked twice, and the approved operation runs once.
async fn an_approval_is_found_again_after_a_restart(reopen: Reopen) {
    let provider = Arc::new(Provider::default());
    let clock = Arc::new(ManualClock::new(NOW));
    let process = |store: &Arc<dyn OperationStore>| {
        dispatcher(store, &clock, &provider, scoped_registry(), None)
    };
    let first_store = reopen().await;
    let first = process(&first_store);
    let tenant_wide = ask_in(&first, "run-1", "c1", "tenant_refund", "ORD-1").await;
    let run_wide = ask_in(&first, "run-1", "c2", "run_refund", "ORD-2").await;
    let outbox = ask_in(&first, "run-1", "c3", "outbox_refund", "ORD-3").await;
    for asked in [&tenant_wide, &run_wide, &outbox] {
        assert_eq!(
            asked.status,
            Status::AwaitingApproval,
            "{}",
            asked.to_json_string()
        );
    }
    let (tenant_id, run_id) = (approval_id(&tenant_wide), approval_id(&run_wide));
    let outbox_id = approval_id(&outbox);
    drop(first);
    drop(first_store);
    clock.advance_ms(60_000);

    // After a restart, in the same run: the same approvals, as replays.
    let store = reopen().await;
    let second = process(&store);
    for (tool, order, id) in [
        ("tenant_refund", "ORD-1", &tenant_id),
        ("run_refund", "ORD-2", &run_id),
    ] {
        let again = ask_in(&second, "run-1", "c3", tool, order).await;
        assert_eq!(
            again.status,
            Status::AwaitingApproval,
            "{tool}: {}",
            again.to_json_string()
        );
        assert!(again.replayed, "{tool}: {}", again.to_json_string());
        assert_eq!(&approval_id(&again), id, "{tool}");
    }
    // In a new run, the tenant's key finds it too, on either write path.
    for (tool, order, id) in [
        ("tenant_refund", "ORD-1", &tenant_id),
        ("outbox_refund", "ORD-3", &outbox_id),
    ] {
        let new_run = ask_in(&second, "run-2", "c1", tool, order).await;
        assert_eq!(new_run.status, Status::AwaitingApproval, "{tool}");
        assert!(new_run.replayed, "{tool}");
        assert_eq!(&approval_id(&new_run), id, "{tool}");
    }
    let asked = store
        .list_approvals(ApprovalQuery {
            tenant: Some("acme"),
            ..ApprovalQuery::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = asked.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "one approval a call, never a second: {ids:?}");
    let decided = decide(&*store, &tenant_id, &manager(), Verdict::Approve, NOW).await;
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
    drop(second);
    drop(store);

    // After another restart, in a third run: the decided approval runs, once.
    let store = reopen().await;
    let third = process(&store);
    let ran = ask_in(&third, "run-3", "c1", "tenant_refund", "ORD-1").await;
    assert_eq!(ran.status, Status::Succeeded, "{}", ran.to_json_string());
    let replay = ask_in(&third, "run-4", "c1", "tenant_refund", "ORD-1").await;
    assert!(replay.is_succeeded() && replay.replayed);
    assert_eq!(provider.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_approval_is_found_again_after_a_restart_on_sqlite() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("operations.db");
    an_approval_is_found_again_after_a_restart(Box::new(move || {
        let (file, _dir) = (file.clone(), dir.clone());
        Box::pin(async move {
            let store = toolgate::store::SqliteStore::open(&file).await.unwrap();
            Arc::new(store) as Arc<dyn OperationStore>
        })
    }))
    .await;
}

#[tokio::test]
async fn an_approval_is_found_again_after_a_restart_on_postgres() {
    let url = toolgate_test_postgres::test_database().await;
    an_approval_is_found_again_after_a_restart(Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let store = toolgate::store::PostgresStore::connect(&url).await.unwrap();
            Arc::new(store) as Arc<dyn OperationStore>
        })
    }))
    .await;
}

/// The approval of a run that is then aborted (the agent called a tool it may not call) is
/// rejected as `run_aborted`, waiting or approved, and never runs: not by the runner, not by the
/// model asking again in another run, not by an approver approving it after the abort.
async fn an_aborted_runs_approvals_are_rejected_and_never_run(store: Arc<dyn OperationStore>) {
    let rig = Rig::new(store);
    let dispatcher = rig.with(scoped_registry(), None);
    let waiting = approval_id(&ask_in(&dispatcher, "run-1", "c1", "tenant_refund", "ORD-1").await);
    let approved = approval_id(&ask_in(&dispatcher, "run-1", "c2", "tenant_refund", "ORD-2").await);
    let elsewhere =
        approval_id(&ask_in(&dispatcher, "run-2", "c1", "tenant_refund", "ORD-3").await);
    let decided = decide(&*rig.store, &approved, &manager(), Verdict::Approve, NOW).await;
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
    rig.clock.advance_ms(1_000);

    // The agent calls a tool it may not call: the run is aborted.
    let close = ToolCall::new("c3", "close_account", json!({"account_id": "ACC-1"}));
    let aborted = dispatcher.dispatch(&agent_in("run-1"), close).await;
    assert!(aborted.is_err(), "{aborted:?}");

    let aborted_at = rig.clock.now_ms();
    for id in [&waiting, &approved] {
        let approval = rig.store.approval(id).await.unwrap().unwrap();
        assert_eq!(approval.status, ApprovalStatus::Rejected, "{id}");
        let last = approval.last_decision().unwrap();
        assert_eq!(
            (last.by.as_str(), last.reason.as_str(), last.at_ms),
            ("toolgate", "run_aborted", aborted_at),
            "{id}"
        );
        let record = rig.store.get("acme", &approval.key).await.unwrap().unwrap();
        assert_eq!(record.state, OperationState::Rejected, "{id}");
    }
    let other = rig.store.approval(&elsewhere).await.unwrap().unwrap();
    assert_eq!(
        other.status,
        ApprovalStatus::Pending,
        "another run's stands"
    );

    // Not by the runner.
    let pass = dispatcher.run_approved(10).await.unwrap();
    assert!(pass.executed.is_empty(), "{pass:?}");
    // Not by the model, asking again in another run.
    for (call, order) in [("c1", "ORD-1"), ("c2", "ORD-2")] {
        let again = ask_in(&dispatcher, "run-3", call, "tenant_refund", order).await;
        assert_eq!(again.status, Status::Rejected, "{}", again.to_json_string());
        let error = again.explanation().unwrap();
        assert_eq!(error.kind, ErrorKind::Rejected);
        let why = error.why.as_deref().unwrap();
        assert!(why.contains("run_aborted"), "{why}");
        assert!(why.contains("aborted"), "{why}");
        assert!(
            !why.contains("close_account"),
            "the model does not see the abort's detail: {why}"
        );
    }
    // Not by an approver approving it after the abort: refused, and it stays rejected.
    for id in [&waiting, &approved] {
        let late = decide(
            &*rig.store,
            id,
            &manager(),
            Verdict::Approve,
            rig.clock.now_ms(),
        )
        .await;
        let Decided::Refused {
            refusal: Refusal::RunAborted,
            approval: Some(approval),
        } = late
        else {
            panic!("{id}: {late:?}");
        };
        assert_eq!(approval.status, ApprovalStatus::Rejected);
        let told = Refusal::RunAborted.explain(Some(&approval));
        assert!(told.contains("run-1") && told.contains("aborted"), "{told}");
    }
    assert_eq!(rig.runs(), 0);
    // Each rejection is in the audit trail, by toolgate, and so is each refused attempt to
    // decide after it.
    let decisions: Vec<_> = audit_of(&rig, AuditKind::Decision).await;
    assert_eq!(
        decisions,
        vec![
            ("approved".to_owned(), "manager".to_owned()),
            ("rejected".to_owned(), "toolgate".to_owned()),
            ("rejected".to_owned(), "toolgate".to_owned()),
            ("refused".to_owned(), "manager".to_owned()),
            ("refused".to_owned(), "manager".to_owned()),
        ]
    );
}

/// An approval asked while its run was being aborted (stored after the abort, in a race the
/// abort's own rejection cannot see) is rejected as `run_aborted` by the checks made before it
/// runs.
async fn an_approval_the_abort_missed_is_rejected_before_it_runs(store: Arc<dyn OperationStore>) {
    use toolgate::run::RunAborted;
    use toolgate::store::{ApprovalRecord, Claim, ClaimRequest, RunKey};
    let rig = Rig::new(store);
    let dispatcher = rig.with(scoped_registry(), None);
    let run = RunKey {
        tenant: "acme",
        run_id: "run-1",
    };
    let abort = RunAborted {
        kind: ErrorKind::PolicyViolation,
        reason: "the agent tried to close an account".to_owned(),
    };
    rig.store
        .abort_run(AbortRequest {
            run,
            abort: &abort,
            now_ms: NOW,
        })
        .await
        .unwrap();
    // What a call of run-1 that raced the abort stores: an approval like one asked in run-2.
    let template = approval_id(&ask_in(&dispatcher, "run-2", "c1", "tenant_refund", "ORD-1").await);
    let template = rig.store.approval(&template).await.unwrap().unwrap();
    let record = rig.store.get("acme", &template.key).await.unwrap().unwrap();
    let raced = ApprovalRecord {
        id: "apr_raced".to_owned(),
        key: "tg_raced".to_owned(),
        run_id: "run-1".to_owned(),
        ..template
    };
    let claim = rig
        .store
        .claim(ClaimRequest {
            tenant: "acme",
            key: "tg_raced",
            tool: "tenant_refund",
            request_hash: &record.request_hash,
            arguments: &record.arguments,
            now_ms: NOW,
            lease: std::time::Duration::from_secs(30),
            takeover: false,
            approval: Some(&raced),
            unkeyed: None,
        })
        .await
        .unwrap();
    assert!(matches!(claim, Claim::Approval(_)), "{claim:?}");
    let decided = decide(&*rig.store, "apr_raced", &manager(), Verdict::Approve, NOW).await;
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
    let pass = dispatcher.run_approved(10).await.unwrap();
    assert_eq!(pass.executed.len(), 1, "{pass:?}");
    let result = &pass.executed[0].result;
    assert_eq!(
        result.status,
        Status::Rejected,
        "{}",
        result.to_json_string()
    );
    let why = result.explanation().unwrap().why.clone().unwrap();
    assert!(why.contains("run_aborted"), "{why}");
    let raced = rig.store.approval("apr_raced").await.unwrap().unwrap();
    assert_eq!(raced.status, ApprovalStatus::Rejected);
    assert_eq!(raced.last_decision().unwrap().reason, "run_aborted");
    assert_eq!(rig.runs(), 0);
}

/// What the run check costs: a write under the threshold asks the store nothing more (no read of
/// its run), and an approved operation reads its run once, before it runs.
#[tokio::test]
async fn only_an_approved_operation_reads_its_run() {
    use toolgate_test::{ControlledStore, Request};
    let counted = Arc::new(ControlledStore::new(Arc::new(MemoryStore::new())));
    let store: Arc<dyn OperationStore> = counted.clone();
    let rig = Rig::new(store);
    let dispatcher = rig.with(scoped_registry(), None);
    let asked = |counted: &ControlledStore<MemoryStore>| -> Vec<(&str, u64)> {
        Request::ALL
            .iter()
            .map(|r| (r.name(), counted.asked(*r)))
            .filter(|(_, n)| *n > 0)
            .collect()
    };
    let small = ToolCall::new(
        "c1",
        "tenant_refund",
        json!({"order_id": "ORD-1", "amount": 10.0}),
    );
    let ran = dispatcher
        .dispatch(&agent_in("run-1"), small)
        .await
        .unwrap();
    assert!(ran.result.is_succeeded(), "{}", ran.result.to_json_string());
    assert_eq!(
        asked(&counted),
        [
            ("claim", 1),
            ("succeed", 1),
            ("begin_turn", 1),
            ("append_audit", 1)
        ],
        "a write under the threshold"
    );
    let id = approval_id(&ask_in(&dispatcher, "run-1", "c2", "tenant_refund", "ORD-2").await);
    decide(&*rig.store, &id, &manager(), Verdict::Approve, NOW).await;
    let before = counted.asked(Request::Run);
    let ran = ask_in(&dispatcher, "run-1", "c3", "tenant_refund", "ORD-2").await;
    assert!(ran.is_succeeded(), "{}", ran.to_json_string());
    assert_eq!(
        counted.asked(Request::Run) - before,
        1,
        "one read of its run"
    );
}

/// An abort that meets a store it cannot reach is tried again under the store policy: once the
/// store holds it, the run's approval is rejected as `run_aborted`.
#[tokio::test(start_paused = true)]
async fn an_abort_is_stored_through_a_passing_outage() {
    use toolgate_test::{ControlledStore, Fault, Request};
    let counted = Arc::new(ControlledStore::new(Arc::new(MemoryStore::new())));
    let store: Arc<dyn OperationStore> = counted.clone();
    let rig = Rig::new(store);
    let dispatcher = rig.with(scoped_registry(), None);
    let id = approval_id(&ask_in(&dispatcher, "run-1", "c1", "tenant_refund", "ORD-1").await);
    counted.fail_next(Request::AbortRun, 2, Fault::Refused);
    let close = ToolCall::new("c2", "close_account", json!({"account_id": "ACC-1"}));
    assert!(
        dispatcher
            .dispatch(&agent_in("run-1"), close)
            .await
            .is_err()
    );
    assert_eq!(
        counted.asked(Request::AbortRun),
        3,
        "two faults, then stored"
    );
    let approval = rig.store.approval(&id).await.unwrap().unwrap();
    assert!(approval.is_run_aborted(), "{approval:?}");
}

/// Look up an order the agent must not see: a policy violation, which aborts the run (once a
/// write of the turn reached its claim).
#[tool(name = "forbidden_lookup")]
async fn forbidden_lookup(ctx: &Ctx, order_id: String) -> Result<String, ToolError> {
    ctx.state::<Arc<Provider>>()?.at_claim.notified().await;
    Err(ToolError::new(
        ErrorKind::PolicyViolation,
        format!("{order_id} belongs to another customer"),
    ))
}

/// A call of a turn that asks for an approval after another call of the same turn aborted the
/// run (its claim stored after the abort) is rejected as `run_aborted` before the turn ends,
/// and its fate says so.
#[tokio::test]
async fn an_approval_asked_while_its_turn_aborts_is_rejected_with_the_run() {
    use toolgate_test::{ControlledStore, Request};
    let counted = Arc::new(ControlledStore::new(Arc::new(MemoryStore::new())));
    let store: Arc<dyn OperationStore> = counted.clone();
    let rig = Rig::new(store);
    let mut registry = scoped_registry();
    registry.register::<forbidden_lookup>().unwrap();
    let dispatcher = rig.with(registry, None);
    // The write reaches its claim, then the read aborts the run, then the claim goes on: the
    // race, made certain.
    let mut answered = counted.watch_answered();
    let provider = rig.provider.clone();
    counted.before_next(Request::Claim, move || async move {
        provider.at_claim.notify_one();
        answered
            .wait_for(|tally| tally.of(Request::AbortRun) >= 1)
            .await
            .unwrap();
    });
    let calls = vec![
        ToolCall::new("c1", "forbidden_lookup", json!({"order_id": "ORD-9"})),
        ToolCall::new(
            "c2",
            "tenant_refund",
            json!({"order_id": "ORD-1", "amount": 8000.0}),
        ),
    ];
    let session = agent_in("run-1");
    let turn = dispatcher.dispatch_turn(&session, calls);
    let aborted = tokio::time::timeout(std::time::Duration::from_secs(30), turn)
        .await
        .expect("the write reaches its claim while the read waits for it")
        .unwrap_err();
    assert_eq!(counted.asked(Request::AbortRun), 2, "stored, then again");
    let fate = &aborted.calls[1].fate;
    let toolgate::run::Fate::Answered(result) = fate else {
        panic!("{fate:?}");
    };
    assert_eq!(
        result.status,
        Status::Rejected,
        "{}",
        result.to_json_string()
    );
    let approval = rig
        .store
        .approval(&approval_id(result))
        .await
        .unwrap()
        .unwrap();
    assert!(approval.is_run_aborted(), "{approval:?}");
    let decisions = audit_of(&rig, AuditKind::Decision).await;
    assert_eq!(
        decisions,
        vec![("rejected".to_owned(), "toolgate".to_owned())]
    );
    assert_eq!(rig.runs(), 0);
}
