//! The step journal: a step runs until its outcome is recorded, never once it succeeded, and is
//! never rerun while its outcome is unknown; a journal that is settled lets an ended lease be
//! taken over; `partial` is claimed again by the same request only (a record under a version-1
//! hash included); other arguments never see the steps of earlier ones.

use toolgate_core::idempotency::UnkeyedRequest;
use toolgate_core::store::EventSettlement;
use toolgate_core::store::StepRequest;
use toolgate_core::store::{
    AttemptFailure, Claim, ClaimToken, OperationState, OperationStore, PartialOutcome, Resolution,
    ResolveRequest, StepOutcome, StepRecord, StepStart, StepStatus, StoreError, Success,
};

use super::fixture::{T0, acquire, error, owner, request};
use super::outbox::queue;

/// The report a partial operation stores as its result.
const REPORT: &str =
    r#"{"steps":[{"name":"crm","status":"succeeded"},{"name":"notify","status":"failed"}]}"#;

/// Begins the step `name` under `holder`.
async fn begin(
    store: &dyn OperationStore,
    holder: &ClaimToken,
    name: &str,
    now_ms: i64,
) -> StepStart {
    store
        .begin_step(StepRequest {
            owner: holder,
            name,
            now_ms,
        })
        .await
        .unwrap_or_else(|err| panic!("begin {name}: {err}"))
}

/// Runs the step `name` under `holder` to `outcome`: it must be run.
async fn run(
    store: &dyn OperationStore,
    holder: &ClaimToken,
    name: &str,
    outcome: StepOutcome<'_>,
    now_ms: i64,
) {
    assert_eq!(
        begin(store, holder, name, now_ms).await,
        StepStart::Run,
        "{name}"
    );
    store
        .finish_step(
            StepRequest {
                owner: holder,
                name,
                now_ms,
            },
            outcome,
        )
        .await
        .unwrap_or_else(|err| panic!("finish {name}: {err}"));
}

/// The journal of `acme`/`key` as (name, seq, status, attempt).
async fn journal(store: &dyn OperationStore, key: &str) -> Vec<(String, u32, StepStatus, u32)> {
    store
        .steps("acme", key)
        .await
        .unwrap()
        .into_iter()
        .map(|s: StepRecord| (s.name, s.seq, s.status, s.attempt))
        .collect()
}

/// `(name, seq, status, attempt)` as owned.
fn entry(name: &str, seq: u32, status: StepStatus, attempt: u32) -> (String, u32, StepStatus, u32) {
    (name.into(), seq, status, attempt)
}

/// A new step is `started` and run (seq 1, 2, … in the order begun); a succeeded one answers
/// its output and never runs again; a failed one runs again; a `started` one is unknown and is
/// not changed.
pub async fn a_step_runs_until_its_outcome_is_recorded(store: &dyn OperationStore) {
    let holder = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h1", T0)).await,
    );
    assert_eq!(begin(store, &holder, "crm", T0 + 1).await, StepStart::Run);
    assert_eq!(
        begin(store, &holder, "notify", T0 + 2).await,
        StepStart::Run
    );
    assert_eq!(
        journal(store, "k1").await,
        [
            entry("crm", 1, StepStatus::Started, 1),
            entry("notify", 2, StepStatus::Started, 1)
        ]
    );
    store
        .finish_step(
            StepRequest {
                owner: &holder,
                name: "crm",
                now_ms: T0 + 3,
            },
            StepOutcome::Succeeded(r#"{"crm":"ok"}"#),
        )
        .await
        .unwrap();
    let StepStart::Done(done) = begin(store, &holder, "crm", T0 + 4).await else {
        panic!("a succeeded step is done");
    };
    assert_eq!(done.output.as_deref(), Some(r#"{"crm":"ok"}"#));
    assert_eq!(
        (done.seq, done.status, done.updated_ms),
        (1, StepStatus::Succeeded, T0 + 3)
    );

    let failure = error(1, "provider_unavailable");
    store
        .finish_step(
            StepRequest {
                owner: &holder,
                name: "notify",
                now_ms: T0 + 5,
            },
            StepOutcome::Failed(&failure),
        )
        .await
        .unwrap();
    let failed = store.steps("acme", "k1").await.unwrap().remove(1);
    assert_eq!(
        (failed.status, failed.error.as_ref()),
        (StepStatus::Failed, Some(&failure))
    );
    assert_eq!(
        begin(store, &holder, "notify", T0 + 6).await,
        StepStart::Run
    );
    let before = store.steps("acme", "k1").await.unwrap();
    let StepStart::Unknown(unknown) = begin(store, &holder, "notify", T0 + 7).await else {
        panic!("a started step is unknown");
    };
    assert_eq!((unknown.seq, unknown.status), (2, StepStatus::Started));
    assert_eq!(store.steps("acme", "k1").await.unwrap(), before);
    assert_eq!(
        begin(store, &holder, "receipt", T0 + 8).await,
        StepStart::Run
    );
    assert_eq!(
        journal(store, "k1").await[2],
        entry("receipt", 3, StepStatus::Started, 1)
    );
}

/// Only the claim's holder journals: another attempt, or a record no longer `processing`, is
/// refused (LostClaim); so is the outcome of a step never begun. Nothing changes.
pub async fn a_step_of_a_claim_not_held_is_refused(store: &dyn OperationStore) {
    let holder = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h1", T0)).await,
    );
    run(
        store,
        &holder,
        "crm",
        StepOutcome::Failed(&error(1, "refused")),
        T0,
    )
    .await;
    let before = store.steps("acme", "k1").await.unwrap();
    let stranger = owner("acme", "k1", 2);
    let lost = store
        .begin_step(StepRequest {
            owner: &stranger,
            name: "crm",
            now_ms: T0 + 1,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    let lost = store
        .begin_step(StepRequest {
            owner: &stranger,
            name: "other",
            now_ms: T0 + 1,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    let lost = store
        .finish_step(
            StepRequest {
                owner: &stranger,
                name: "crm",
                now_ms: T0 + 1,
            },
            StepOutcome::Succeeded("1"),
        )
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    // A step never begun has no outcome to record: refused (the trait does not say with which
    // error).
    let refused = store
        .finish_step(
            StepRequest {
                owner: &holder,
                name: "never",
                now_ms: T0 + 1,
            },
            StepOutcome::Succeeded("1"),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(store.steps("acme", "k1").await.unwrap(), before);
    store
        .succeed(Success {
            owner: &holder,
            result: "1",
            now_ms: T0 + 2,
            audit: None,
        })
        .await
        .unwrap();
    let lost = store
        .begin_step(StepRequest {
            owner: &holder,
            name: "crm",
            now_ms: T0 + 3,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    let lost = store
        .finish_step(
            StepRequest {
                owner: &holder,
                name: "crm",
                now_ms: T0 + 3,
            },
            StepOutcome::Succeeded("1"),
        )
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );
    assert_eq!(store.steps("acme", "k1").await.unwrap(), before);
}

/// An ended lease (no takeover) whose journal is settled is taken over, attempt + 1, its
/// succeeded steps still done; with a step `started`, or no step at all, it is
/// `outcome_unknown`.
pub async fn an_ended_lease_with_a_settled_journal_is_taken_over(store: &dyn OperationStore) {
    for key in ["settled", "in_flight", "empty"] {
        acquire(store, request("acme", key, "h1", T0)).await;
    }
    let settled = owner("acme", "settled", 1);
    run(store, &settled, "crm", StepOutcome::Succeeded("1"), T0 + 1).await;
    run(
        store,
        &settled,
        "notify",
        StepOutcome::Failed(&error(1, "refused")),
        T0 + 2,
    )
    .await;
    let in_flight = owner("acme", "in_flight", 1);
    run(
        store,
        &in_flight,
        "crm",
        StepOutcome::Succeeded("1"),
        T0 + 1,
    )
    .await;
    assert_eq!(
        begin(store, &in_flight, "notify", T0 + 2).await,
        StepStart::Run
    );

    let ended = T0 + 30_000;
    assert_eq!(
        acquire(store, request("acme", "settled", "h1", ended)).await,
        2
    );
    let holder = owner("acme", "settled", 2);
    assert!(matches!(
        begin(store, &holder, "crm", ended).await,
        StepStart::Done(_)
    ));
    assert_eq!(begin(store, &holder, "notify", ended).await, StepStart::Run);
    for key in ["in_flight", "empty"] {
        let Claim::Existing(record) = store
            .claim(request("acme", key, "h1", ended))
            .await
            .unwrap()
        else {
            panic!("{key}: an ended lease that may have acted is answered");
        };
        assert_eq!(record.state, OperationState::OutcomeUnknown, "{key}");
        assert_eq!(record.attempt, 1, "{key}");
    }
}

/// `partial` stores the steps' report as the result with the error; the same request claims
/// it again (attempt + 1) and finds its succeeded steps done; another request is a conflict
/// and changes nothing.
pub async fn a_partial_record_is_claimed_again_by_the_same_request_only(
    store: &dyn OperationStore,
) {
    let holder = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h1", T0)).await,
    );
    run(
        store,
        &holder,
        "crm",
        StepOutcome::Succeeded(r#""crm-1""#),
        T0 + 1,
    )
    .await;
    let failure = error(1, "provider_unavailable");
    run(
        store,
        &holder,
        "notify",
        StepOutcome::Failed(&failure),
        T0 + 2,
    )
    .await;
    store
        .partial(PartialOutcome {
            owner: &holder,
            report: REPORT,
            error: &failure,
            now_ms: T0 + 3,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.state, OperationState::Partial);
    assert_eq!(record.result.as_deref(), Some(REPORT));
    assert_eq!(record.errors, vec![failure.clone()]);
    assert_eq!(record.updated_ms, T0 + 3);
    let lost = store
        .partial(PartialOutcome {
            owner: &holder,
            report: REPORT,
            error: &failure,
            now_ms: T0 + 4,
        })
        .await;
    assert!(
        matches!(lost, Err(StoreError::LostClaim { .. })),
        "{lost:?}"
    );

    assert_eq!(
        store
            .claim(request("acme", "k1", "h2", T0 + 5))
            .await
            .unwrap(),
        Claim::Conflict {
            tool: "issue_refund".into()
        }
    );
    assert_eq!(store.get("acme", "k1").await.unwrap(), Some(record));
    assert_eq!(acquire(store, request("acme", "k1", "h1", T0 + 6)).await, 2);
    let again = owner("acme", "k1", 2);
    let StepStart::Done(done) = begin(store, &again, "crm", T0 + 7).await else {
        panic!("the succeeded step is done");
    };
    assert_eq!(done.output.as_deref(), Some(r#""crm-1""#));
    assert_eq!(begin(store, &again, "notify", T0 + 7).await, StepStart::Run);
}

/// A record stored under a version-1 (unkeyed) request hash is the same request as a claim
/// whose [`ClaimRequest::unkeyed`](toolgate_core::store::ClaimRequest::unkeyed) has its
/// arguments, whatever its own (keyed) hash: a `partial` one is claimed again with its journal
/// kept and takes the new hash, and a claim of other arguments is a conflict. A store compares
/// hashes with [`ClaimRequest::same_request`](toolgate_core::store::ClaimRequest::same_request).
pub async fn a_record_under_a_version_1_hash_is_the_same_request(store: &dyn OperationStore) {
    const ARGUMENTS: &str = r#"{"amount":500,"order_id":"ORD-1001"}"#;
    let same = UnkeyedRequest::new("issue_refund", ARGUMENTS);
    let other = UnkeyedRequest::new("issue_refund", r#"{"amount":900,"order_id":"ORD-1001"}"#);
    let v1 = same.hash();
    let mut first = request("acme", "k1", &v1, T0);
    first.arguments = ARGUMENTS;
    let holder = owner("acme", "k1", acquire(store, first).await);
    run(
        store,
        &holder,
        "crm",
        StepOutcome::Succeeded(r#""crm-1""#),
        T0 + 1,
    )
    .await;
    let failure = error(1, "provider_unavailable");
    store
        .partial(PartialOutcome {
            owner: &holder,
            report: REPORT,
            error: &failure,
            now_ms: T0 + 2,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().expect("stored");

    let mut conflicting = request("acme", "k1", "v2:other", T0 + 3);
    conflicting.unkeyed = Some(other);
    assert_eq!(
        store.claim(conflicting).await.unwrap(),
        Claim::Conflict {
            tool: "issue_refund".into()
        }
    );
    assert_eq!(store.get("acme", "k1").await.unwrap(), Some(record));
    let mut again = request("acme", "k1", "v2:same", T0 + 4);
    again.arguments = ARGUMENTS;
    again.unkeyed = Some(same);
    assert_eq!(acquire(store, again).await, 2);
    let taken = owner("acme", "k1", 2);
    let StepStart::Done(done) = begin(store, &taken, "crm", T0 + 5).await else {
        panic!("the step the version-1 request did is done");
    };
    assert_eq!(done.output.as_deref(), Some(r#""crm-1""#));
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.request_hash, "v2:same");
}

/// A `failed` record taken over by the same request keeps its journal; by another request, its
/// journal is gone: steps are never answered to other arguments.
pub async fn a_takeover_under_other_arguments_clears_the_journal(store: &dyn OperationStore) {
    let first = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h1", T0)).await,
    );
    run(store, &first, "crm", StepOutcome::Succeeded("1"), T0).await;
    store
        .fail(AttemptFailure {
            owner: &first,
            error: &error(1, "refused"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let same = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h1", T0 + 2)).await,
    );
    assert!(matches!(
        begin(store, &same, "crm", T0 + 2).await,
        StepStart::Done(_)
    ));
    store
        .fail(AttemptFailure {
            owner: &same,
            error: &error(2, "refused"),
            now_ms: T0 + 3,
        })
        .await
        .unwrap();
    let other = owner(
        "acme",
        "k1",
        acquire(store, request("acme", "k1", "h2", T0 + 4)).await,
    );
    assert_eq!(other.attempt, 3);
    assert_eq!(begin(store, &other, "crm", T0 + 4).await, StepStart::Run);
    assert_eq!(
        journal(store, "k1").await,
        [entry("crm", 1, StepStatus::Started, 3)]
    );
}

/// The reconciler's "not applied" fails the `started` steps: the record is `partial` when a
/// step of it succeeded, `failed` otherwise.
pub async fn reconciling_steps_as_not_applied_fails_the_started_ones(store: &dyn OperationStore) {
    for key in ["half", "none"] {
        acquire(store, request("acme", key, "h1", T0)).await;
    }
    let half = owner("acme", "half", 1);
    run(store, &half, "crm", StepOutcome::Succeeded("1"), T0).await;
    assert_eq!(begin(store, &half, "notify", T0).await, StepStart::Run);
    let none = owner("acme", "none", 1);
    assert_eq!(begin(store, &none, "crm", T0).await, StepStart::Run);
    for holder in [&half, &none] {
        store
            .mark_unknown(AttemptFailure {
                owner: holder,
                error: &error(1, "outcome_unknown"),
                now_ms: T0 + 1,
            })
            .await
            .unwrap();
    }
    let settled = |key: &'static str| async move {
        store
            .resolve(ResolveRequest {
                tenant: "acme",
                key,
                resolution: Resolution::NotApplied,
                now_ms: T0 + 2,
            })
            .await
            .unwrap()
            .expect("settled")
            .state
    };
    assert_eq!(settled("half").await, OperationState::Partial);
    assert_eq!(
        journal(store, "half").await,
        [
            entry("crm", 1, StepStatus::Succeeded, 1),
            entry("notify", 2, StepStatus::Failed, 1)
        ]
    );
    assert_eq!(settled("none").await, OperationState::Failed);
    assert_eq!(
        journal(store, "none").await,
        [entry("crm", 1, StepStatus::Failed, 1)]
    );
}

/// Retention deletes the events and journals of the records it purges, and never a `queued`
/// record or its event.
pub async fn retention_purges_events_and_steps_with_their_records(store: &dyn OperationStore) {
    queue(store, "acme", "queued", "issue_refund", T0).await;
    queue(store, "acme", "delivered", "issue_refund", T0 + 1).await;
    let leased = store
        .lease_events(toolgate_core::store::EventLease {
            worker: "w1",
            tools: &["issue_refund"],
            now_ms: T0 + 1,
            lease: std::time::Duration::from_secs(30),
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(leased[0].event.key, "queued");
    store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "queued",
            attempt: 1,
            outcome: toolgate_core::store::DeliveryOutcome::Dead(&error(1, "refused")),
            now_ms: T0 + 2,
            audit: None,
        })
        .await
        .unwrap();
    let leased = store
        .lease_events(toolgate_core::store::EventLease {
            worker: "w1",
            tools: &["issue_refund"],
            now_ms: T0 + 3,
            lease: std::time::Duration::from_secs(30),
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(leased[0].event.key, "delivered");
    store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "delivered",
            attempt: 1,
            outcome: toolgate_core::store::DeliveryOutcome::Delivered("1"),
            now_ms: T0 + 4,
            audit: None,
        })
        .await
        .unwrap();
    let stepped = owner(
        "acme",
        "stepped",
        acquire(store, request("acme", "stepped", "h1", T0)).await,
    );
    run(store, &stepped, "crm", StepOutcome::Succeeded("1"), T0).await;
    store
        .succeed(Success {
            owner: &stepped,
            result: "1",
            now_ms: T0 + 5,
            audit: None,
        })
        .await
        .unwrap();

    assert_eq!(store.purge(T0 + 10).await.unwrap(), 2);
    assert_eq!(store.get("acme", "delivered").await.unwrap(), None);
    assert_eq!(store.event("acme", "delivered").await.unwrap(), None);
    assert_eq!(store.get("acme", "stepped").await.unwrap(), None);
    assert_eq!(store.steps("acme", "stepped").await.unwrap(), []);
    let queued = store.get("acme", "queued").await.unwrap().expect("kept");
    assert_eq!(queued.state, OperationState::Queued);
    let event = store.event("acme", "queued").await.unwrap().expect("kept");
    assert_eq!(event.status, toolgate_core::store::EventStatus::Dead);
}
