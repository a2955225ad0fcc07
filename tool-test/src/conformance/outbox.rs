//! The transactional outbox: `begin` claims inside a transaction that commits the operation with
//! its event or leaves nothing; workers lease due events, never one twice, and settle them with
//! their operation; an operator resumes a dead one; the reconciler settles an unknown delivery.

pub(super) mod audit;
pub(super) mod maybe_applied;

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use toolgate_core::store::EventSettlement;
use toolgate_core::store::{
    AttemptFailure, Begun, Claim, ClaimRequest, Commit, DeliveryOutcome, EventLease, EventQuery,
    EventStatus, LeasedEvent, NewEvent, OperationState, OperationStore, OutboxEvent, Resolution,
    ResolveRequest, ResumeRequest, StoreError, StoreTransaction, Success,
};

use super::fixture::{T0, acquire, error, owner, request};

/// The result an outbox tool's body answers: what the model reads.
const ACCEPTED: &str = r#"{"refund_request":"rr_1","status":"accepted"}"#;

/// The provider's answer to a delivery.
pub(super) const PAID: &str = r#"{"refund_id":"re_1"}"#;

/// The lease every worker asks for.
const LEASE: Duration = Duration::from_secs(30);

/// The payload of `key`'s event.
fn payload(key: &str) -> String {
    format!(r#"{{"amount":500,"order":"{key}"}}"#)
}

/// Begins `req`, which must open a transaction; answers it with the attempt.
async fn open(
    store: &dyn OperationStore,
    req: ClaimRequest<'_>,
) -> (Box<dyn StoreTransaction>, u32) {
    match store.begin(req).await.expect("begin") {
        Begun::Open { tx, attempt, .. } => (tx, attempt),
        other => panic!("expected {} to open a transaction, got {other:?}", req.key),
    }
}

/// Begins `req`, which must be settled; answers the claim.
async fn settled(store: &dyn OperationStore, req: ClaimRequest<'_>) -> Claim {
    match store.begin(req).await.expect("begin") {
        Begun::Settled(claim) => claim,
        other => panic!("expected {} to be settled, got {other:?}", req.key),
    }
}

/// An outbox call of `tool` under `key` for `tenant`, committed at `now_ms` with its event.
pub(super) async fn queue(
    store: &dyn OperationStore,
    tenant: &str,
    key: &str,
    tool: &str,
    now_ms: i64,
) {
    let req = ClaimRequest {
        tool,
        ..request(tenant, key, "h1", now_ms)
    };
    let (tx, attempt) = open(store, req).await;
    let event = NewEvent {
        payload: payload(key),
    };
    tx.commit(Commit {
        owner: &owner(tenant, key, attempt),
        result: ACCEPTED,
        event: Some(&event),
        now_ms,
    })
    .await
    .expect("commit");
}

/// `worker`'s lease of up to `limit` events of `tools` at `now_ms`.
pub(super) fn lease<'a>(
    worker: &'a str,
    tools: &'a [&'a str],
    now_ms: i64,
    limit: u32,
) -> EventLease<'a> {
    EventLease {
        worker,
        tools,
        now_ms,
        lease: LEASE,
        limit,
    }
}

/// The keys of `leased`, in order.
fn keys(leased: &[LeasedEvent]) -> Vec<&str> {
    leased.iter().map(|l| l.event.key.as_str()).collect()
}

/// The event of `(tenant, key)`, which must exist.
pub(super) async fn event_of(store: &dyn OperationStore, tenant: &str, key: &str) -> OutboxEvent {
    store
        .event(tenant, key)
        .await
        .expect("read an event")
        .unwrap_or_else(|| panic!("{tenant}/{key} has an event"))
}

/// Leases the one due event `key` at `now_ms`: answers its attempt.
pub(super) async fn lease_one(store: &dyn OperationStore, key: &str, now_ms: i64) -> u32 {
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], now_ms, 10))
        .await
        .expect("lease");
    assert_eq!(keys(&leased), [key], "the one due event at {now_ms}");
    leased[0].event.attempt
}

/// A new key opens a transaction under attempt 1; its commit makes the record `queued` with the
/// tool's result and the event `pending`, due at the commit, attempt 0; a commit without an
/// event makes the record `succeeded`, with no event.
pub async fn a_committed_outbox_call_is_queued_with_its_event(store: &dyn OperationStore) {
    queue(store, "acme", "k1", "issue_refund", T0 + 5).await;
    let record = store.get("acme", "k1").await.unwrap().expect("committed");
    assert_eq!(record.state, OperationState::Queued);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    assert_eq!(record.attempt, 1);
    let event = event_of(store, "acme", "k1").await;
    assert_eq!(
        (event.tool.as_str(), event.payload.clone(), event.status),
        ("issue_refund", payload("k1"), EventStatus::Pending)
    );
    assert_eq!((event.attempt, event.resumed_at), (0, 0));
    assert_eq!((event.due_ms, event.created_ms), (T0 + 5, T0 + 5));
    assert_eq!(
        (event.worker, event.last_error, event.result),
        (None, None, None)
    );

    let (tx, attempt) = open(store, request("acme", "k2", "h1", T0)).await;
    assert_eq!(attempt, 1);
    tx.commit(Commit {
        owner: &owner("acme", "k2", attempt),
        result: ACCEPTED,
        event: None,
        now_ms: T0 + 1,
    })
    .await
    .unwrap();
    let record = store.get("acme", "k2").await.unwrap().expect("committed");
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    assert_eq!(store.event("acme", "k2").await.unwrap(), None);
}

/// A rolled-back or dropped transaction leaves no record and no event; a `failed` record taken
/// by `begin` is as it was after the rollback, and the key can be claimed again at once.
pub async fn a_rolled_back_outbox_call_leaves_nothing(store: &dyn OperationStore) {
    let (tx, _) = open(store, request("acme", "k1", "h1", T0)).await;
    tx.rollback().await.unwrap();
    let (tx, _) = open(store, request("acme", "k2", "h1", T0)).await;
    drop(tx);
    for key in ["k1", "k2"] {
        assert_eq!(store.get("acme", key).await.unwrap(), None, "{key}");
        assert_eq!(store.event("acme", key).await.unwrap(), None, "{key}");
    }
    assert_eq!(store.list_events(EventQuery::default()).await.unwrap(), []);

    let first = acquire(store, request("acme", "k3", "h1", T0)).await;
    store
        .fail(AttemptFailure {
            owner: &owner("acme", "k3", first),
            error: &error(1, "refused"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let before = store.get("acme", "k3").await.unwrap();
    let (tx, attempt) = open(store, request("acme", "k3", "h2", T0 + 2)).await;
    assert_eq!(attempt, 2);
    tx.rollback().await.unwrap();
    assert_eq!(store.get("acme", "k3").await.unwrap(), before);
    // Nothing is left holding the key or the store: a claim acquires it at once.
    assert_eq!(acquire(store, request("acme", "k1", "h1", T0 + 3)).await, 1);
    assert_eq!(acquire(store, request("acme", "k3", "h1", T0 + 3)).await, 2);
}

/// `begin` on a `succeeded` or `queued` key answers the record, and under another request a
/// conflict, as `claim` does, changing nothing.
pub async fn begin_answers_a_settled_key_as_claim_does(store: &dyn OperationStore) {
    queue(store, "acme", "queued", "issue_refund", T0).await;
    let done = acquire(store, request("acme", "done", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "done", done),
            result: "1",
            now_ms: T0,
            audit: None,
        })
        .await
        .unwrap();
    for key in ["queued", "done"] {
        let before = store.get("acme", key).await.unwrap().expect("stored");
        assert_eq!(
            settled(store, request("acme", key, "h1", T0 + 1)).await,
            Claim::Existing(before.clone()),
            "{key}"
        );
        assert_eq!(
            settled(store, request("acme", key, "h2", T0 + 1)).await,
            Claim::Conflict {
                tool: "issue_refund".into()
            },
            "{key}"
        );
        assert_eq!(store.get("acme", key).await.unwrap(), Some(before));
    }
    assert_eq!(event_of(store, "acme", "queued").await.attempt, 0);
}

/// A lease takes due `pending` events of the worker's tools, oldest first, at most `limit`:
/// `leased` by the worker until the lease ends, attempt + 1. An event not yet due waits; one
/// whose lease ended is leased again, `taken_over`, attempt + 1.
pub async fn lease_events_takes_due_events_oldest_first(store: &dyn OperationStore) {
    queue(store, "globex", "k1", "issue_refund", T0).await;
    queue(store, "acme", "k2", "issue_refund", T0 + 1).await;
    queue(store, "acme", "k3", "issue_refund", T0 + 2).await;
    queue(store, "acme", "other", "cancel_order", T0 + 3).await;
    let now = T0 + 10;
    let first = store
        .lease_events(lease("w1", &["issue_refund"], now, 2))
        .await
        .unwrap();
    assert_eq!(keys(&first), ["k1", "k2"]);
    for leased in &first {
        assert!(!leased.taken_over);
        assert_eq!(leased.event.status, EventStatus::Leased);
        assert_eq!(leased.event.attempt, 1);
        assert_eq!(leased.event.worker.as_deref(), Some("w1"));
        assert_eq!(leased.event.lease_until_ms, now + 30_000);
        let stored = event_of(store, &leased.event.tenant, &leased.event.key).await;
        assert_eq!(&stored, &leased.event);
    }
    // k3 is due; the event of another tool is not this worker's.
    let second = store
        .lease_events(lease("w1", &["issue_refund"], now, 10))
        .await
        .unwrap();
    assert_eq!(keys(&second), ["k3"]);
    assert_eq!(
        event_of(store, "acme", "other").await.status,
        EventStatus::Pending
    );
    // k3 retried later: not due before its time.
    store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "k3",
            attempt: 1,
            outcome: DeliveryOutcome::Retry {
                error: &error(1, "provider_unavailable"),
                due_ms: now + 40_000,
                maybe_applied: false,
            },
            now_ms: now + 1,
            audit: None,
        })
        .await
        .unwrap();
    let none = store
        .lease_events(lease("w1", &["issue_refund"], now + 29_999, 10))
        .await
        .unwrap();
    assert_eq!(keys(&none), Vec::<&str>::new());
    // The leases of k1 and k2 ended: taken over by w2.
    let taken = store
        .lease_events(lease(
            "w2",
            &["issue_refund", "cancel_order"],
            now + 30_000,
            10,
        ))
        .await
        .unwrap();
    assert_eq!(keys(&taken), ["k1", "k2", "other"]);
    assert_eq!(
        taken
            .iter()
            .map(|l| (l.taken_over, l.event.attempt))
            .collect::<Vec<_>>(),
        [(true, 2), (true, 2), (false, 1)]
    );
    assert_eq!(taken[0].event.worker.as_deref(), Some("w2"));
    let due = store
        .lease_events(lease("w1", &["issue_refund"], now + 40_000, 10))
        .await
        .unwrap();
    assert_eq!(keys(&due), ["k3"]);
    assert!(!due[0].taken_over);
    assert_eq!(due[0].event.attempt, 2);
}

/// Four workers leasing at once over 40 due events lease each exactly once.
pub async fn concurrent_leases_never_lease_an_event_twice(store: &dyn OperationStore) {
    const EVENTS: usize = 40;
    for index in 0..EVENTS {
        let key = format!("k{index:02}");
        queue(store, "acme", &key, "issue_refund", T0 + index as i64).await;
    }
    let worker = |name: &'static str| async move {
        let mut mine = Vec::new();
        // Bounded: 40 events, at least one a round until none is left.
        for _ in 0..=EVENTS {
            let leased = store
                .lease_events(lease(name, &["issue_refund"], T0 + 100, 3))
                .await
                .expect("lease");
            if leased.is_empty() {
                break;
            }
            mine.extend(leased.into_iter().map(|l| l.event.key));
            tokio::task::yield_now().await;
        }
        mine
    };
    let all: Vec<String> = join_all(["w1", "w2", "w3", "w4"].map(worker))
        .await
        .into_iter()
        .flatten()
        .collect();
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len(), EVENTS, "every event leased once: {all:?}");
    assert_eq!(unique.len(), EVENTS);
    for event in store.list_events(EventQuery::default()).await.unwrap() {
        assert_eq!((event.status, event.attempt), (EventStatus::Leased, 1));
    }
}

/// A delivery's outcome, recorded by its lease's holder, with its operation: delivered →
/// `succeeded` with the tool's result; retry → `pending` at its due time; dead → the operation
/// stays `queued`; unknown → `outcome_unknown` with the error.
pub async fn settle_event_records_the_delivery_with_its_operation(store: &dyn OperationStore) {
    for (index, key) in ["delivered", "retry", "dead", "unknown"]
        .into_iter()
        .enumerate()
    {
        queue(store, "acme", key, "issue_refund", T0 + index as i64).await;
    }
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], T0 + 10, 10))
        .await
        .unwrap();
    assert_eq!(leased.len(), 4);
    let failure = error(1, "provider_unavailable");
    let unknown = error(1, "outcome_unknown");
    let now = T0 + 20;
    let settle = |key: &'static str, outcome| {
        store.settle_event(EventSettlement {
            tenant: "acme",
            key,
            attempt: 1,
            outcome,
            now_ms: now,
            audit: None,
        })
    };

    let event = settle("delivered", DeliveryOutcome::Delivered(PAID))
        .await
        .unwrap();
    assert_eq!(
        (event.status, event.result.as_deref()),
        (EventStatus::Delivered, Some(PAID))
    );
    assert_eq!(event.updated_ms, now);
    let record = store.get("acme", "delivered").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));

    let retry = DeliveryOutcome::Retry {
        error: &failure,
        due_ms: now + 5_000,
        maybe_applied: false,
    };
    let event = settle("retry", retry).await.unwrap();
    assert_eq!(
        (event.status, event.due_ms),
        (EventStatus::Pending, now + 5_000)
    );
    assert_eq!(event.last_error.as_ref(), Some(&failure));
    assert_eq!(event.attempt, 1);
    assert!(!event.maybe_applied, "a 503 leaves it not applied");

    let event = settle("dead", DeliveryOutcome::Dead(&failure))
        .await
        .unwrap();
    assert_eq!(event.status, EventStatus::Dead);
    assert_eq!(event.last_error.as_ref(), Some(&failure));
    for key in ["retry", "dead"] {
        let record = store.get("acme", key).await.unwrap().unwrap();
        assert_eq!(record.state, OperationState::Queued, "{key}");
    }

    let event = settle("unknown", DeliveryOutcome::Unknown(&unknown))
        .await
        .unwrap();
    assert_eq!(event.status, EventStatus::Unknown);
    let record = store.get("acme", "unknown").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    assert_eq!(record.errors, vec![unknown]);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
}

/// An event that is not leased, or leased under another attempt, is not settled: LostClaim,
/// and neither it nor its operation changes.
pub async fn a_stale_or_unleased_event_is_not_settled(store: &dyn OperationStore) {
    queue(store, "acme", "pending", "issue_refund", T0).await;
    let delivered = DeliveryOutcome::Delivered(PAID);
    let lost = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "pending",
            attempt: 0,
            outcome: delivered,
            now_ms: T0 + 1,
            audit: None,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    let lost = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "pending",
            attempt: 1,
            outcome: delivered,
            now_ms: T0 + 1,
            audit: None,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    assert_eq!(
        event_of(store, "acme", "pending").await.status,
        EventStatus::Pending
    );

    assert_eq!(lease_one(store, "pending", T0 + 10).await, 1);
    // Its lease ends; another worker takes it over.
    assert_eq!(lease_one(store, "pending", T0 + 30_010).await, 2);
    let before = event_of(store, "acme", "pending").await;
    for outcome in [delivered, DeliveryOutcome::Dead(&error(1, "refused"))] {
        let lost = store
            .settle_event(EventSettlement {
                tenant: "acme",
                key: "pending",
                attempt: 1,
                outcome,
                now_ms: T0 + 30_011,
                audit: None,
            })
            .await;
        assert!(
            matches!(lost, Err(StoreError::LostClaim { .. })),
            "{lost:?}"
        );
    }
    assert_eq!(event_of(store, "acme", "pending").await, before);
    let record = store.get("acme", "pending").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Queued);
}

/// An operator's resume makes a dead event pending, due now, its budget counted from its
/// current attempt; any other event is answered as it is; a key without one, `None`.
pub async fn resume_event_makes_a_dead_event_pending_again(store: &dyn OperationStore) {
    queue(store, "acme", "dead", "issue_refund", T0).await;
    queue(store, "acme", "pending", "issue_refund", T0 + 1).await;
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], T0 + 10, 1))
        .await
        .unwrap();
    assert_eq!(keys(&leased), ["dead"]);
    store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "dead",
            attempt: 1,
            outcome: DeliveryOutcome::Dead(&error(1, "refused")),
            now_ms: T0 + 11,
            audit: None,
        })
        .await
        .unwrap();
    let resumed = store
        .resume_event(ResumeRequest {
            tenant: "acme",
            key: "dead",
            now_ms: T0 + 500,
        })
        .await
        .unwrap()
        .expect("an event");
    assert_eq!(resumed.status, EventStatus::Pending);
    assert_eq!((resumed.due_ms, resumed.updated_ms), (T0 + 500, T0 + 500));
    assert_eq!((resumed.attempt, resumed.resumed_at), (1, 1));
    assert_eq!(resumed.attempts_spent(), 0);
    assert_eq!(event_of(store, "acme", "dead").await, resumed);
    let record = store.get("acme", "dead").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Queued);
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], T0 + 500, 1))
        .await
        .unwrap();
    assert_eq!(keys(&leased), ["dead"]);
    assert_eq!(leased[0].event.attempt, 2);

    let before = event_of(store, "acme", "pending").await;
    let answered = store
        .resume_event(ResumeRequest {
            tenant: "acme",
            key: "pending",
            now_ms: T0 + 600,
        })
        .await
        .unwrap();
    assert_eq!(answered, Some(before.clone()));
    assert_eq!(event_of(store, "acme", "pending").await, before);
    assert_eq!(
        store
            .resume_event(ResumeRequest {
                tenant: "acme",
                key: "none",
                now_ms: T0
            })
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .resume_event(ResumeRequest {
                tenant: "globex",
                key: "dead",
                now_ms: T0
            })
            .await
            .unwrap(),
        None
    );
}

/// The reconciler settles an unknown delivery: applied → the operation `succeeded` with the
/// tool's result and the event `delivered` with the provider's; not applied → the operation
/// `queued` and the event `pending`, due now, leased again.
pub async fn resolve_settles_an_outbox_operation_with_its_event(store: &dyn OperationStore) {
    for key in ["applied", "not_applied"] {
        queue(store, "acme", key, "issue_refund", T0).await;
    }
    store
        .lease_events(lease("w1", &["issue_refund"], T0 + 10, 10))
        .await
        .unwrap();
    for key in ["applied", "not_applied"] {
        store
            .settle_event(EventSettlement {
                tenant: "acme",
                key,
                attempt: 1,
                outcome: DeliveryOutcome::Unknown(&error(1, "outcome_unknown")),
                now_ms: T0 + 11,
                audit: None,
            })
            .await
            .unwrap();
    }
    let record = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "applied",
            resolution: Resolution::Applied(PAID),
            now_ms: T0 + 100,
        })
        .await
        .unwrap()
        .expect("settled");
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    assert_eq!(store.get("acme", "applied").await.unwrap(), Some(record));
    let event = event_of(store, "acme", "applied").await;
    assert_eq!(
        (event.status, event.result.as_deref()),
        (EventStatus::Delivered, Some(PAID))
    );

    let record = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "not_applied",
            resolution: Resolution::NotApplied,
            now_ms: T0 + 200,
        })
        .await
        .unwrap()
        .expect("settled");
    assert_eq!(record.state, OperationState::Queued);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    let event = event_of(store, "acme", "not_applied").await;
    assert_eq!(
        (event.status, event.due_ms),
        (EventStatus::Pending, T0 + 200)
    );
    assert_eq!(lease_one(store, "not_applied", T0 + 200).await, 2);
}

/// Events are listed oldest first, by tenant, status and limit; a tenant never reads another
/// tenant's event.
pub async fn events_are_listed_by_filter_in_order_and_scoped_by_tenant(store: &dyn OperationStore) {
    queue(store, "globex", "k1", "issue_refund", T0 + 2).await;
    queue(store, "acme", "k2", "issue_refund", T0).await;
    queue(store, "acme", "k3", "issue_refund", T0 + 1).await;
    queue(store, "acme", "k4", "issue_refund", T0 + 3).await;
    assert_eq!(lease_one_of(store, T0 + 10).await, "k2");
    let list = |tenant, status, limit| async move {
        store
            .list_events(EventQuery {
                tenant,
                status,
                limit,
            })
            .await
            .unwrap()
            .into_iter()
            .map(|e| format!("{}/{}", e.tenant, e.key))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(None, None, 0).await,
        ["acme/k2", "acme/k3", "globex/k1", "acme/k4"]
    );
    assert_eq!(list(Some("acme"), None, 2).await, ["acme/k2", "acme/k3"]);
    assert_eq!(
        list(None, Some(EventStatus::Pending), 0).await,
        ["acme/k3", "globex/k1", "acme/k4"]
    );
    assert_eq!(
        list(Some("globex"), Some(EventStatus::Leased), 0).await,
        Vec::<String>::new()
    );
    assert_eq!(store.event("globex", "k2").await.unwrap(), None);
    assert_eq!(event_of(store, "globex", "k1").await.tenant, "globex");
}

/// Leases the oldest due event at `now_ms`; answers its key.
async fn lease_one_of(store: &dyn OperationStore, now_ms: i64) -> String {
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], now_ms, 1))
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    leased[0].event.key.clone()
}
