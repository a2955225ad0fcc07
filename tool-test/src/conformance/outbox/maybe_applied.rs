//! An outbox event remembers that one of its deliveries may have been applied: a retry that
//! says so, an unknown outcome, and a lease taken over from a worker whose lease ended each set
//! it for good; only the reconciler's "not applied" clears it.

use toolgate_core::store::EventSettlement;

use toolgate_core::store::{DeliveryOutcome, OperationStore, Resolution, ResolveRequest};

use super::{event_of, lease, queue};
use crate::conformance::fixture::{T0, error};

/// A retry whose delivery may have applied sets [`maybe_applied`]; a later retry that says
/// nothing keeps it; one that never may have applied leaves it unset; a lease taken over sets
/// it; an unknown outcome sets it; the reconciler's "not applied" requeues the event without
/// it.
///
/// [`maybe_applied`]: toolgate_core::store::OutboxEvent::maybe_applied
pub async fn an_event_remembers_a_delivery_that_may_have_been_applied(store: &dyn OperationStore) {
    for (index, key) in ["lost", "plain", "taken"].into_iter().enumerate() {
        queue(store, "acme", key, "issue_refund", T0 + index as i64).await;
    }
    assert!(!event_of(store, "acme", "lost").await.maybe_applied);
    let leased = store
        .lease_events(lease("w1", &["issue_refund"], T0 + 10, 10))
        .await
        .unwrap();
    assert_eq!(leased.len(), 3);
    assert!(
        leased
            .iter()
            .all(|l| !l.taken_over && !l.event.maybe_applied)
    );
    let retry = |key: &'static str, attempt: u32, kind: &'static str, maybe_applied: bool| {
        let failure = error(attempt, kind);
        async move {
            let outcome = DeliveryOutcome::Retry {
                error: &failure,
                due_ms: T0 + 100,
                maybe_applied,
            };
            store
                .settle_event(EventSettlement {
                    tenant: "acme",
                    key,
                    attempt,
                    outcome,
                    now_ms: T0 + 20,
                    audit: None,
                })
                .await
                .unwrap()
        }
    };

    let event = retry("lost", 1, "outcome_unknown", true).await;
    assert!(event.maybe_applied, "an answer lost: {event:?}");
    let event = retry("plain", 1, "unavailable", false).await;
    assert!(!event.maybe_applied, "a 503: {event:?}");
    assert!(event_of(store, "acme", "lost").await.maybe_applied);

    // The lease of "taken" ends; another worker takes it over with the two due ones.
    let leased = store
        .lease_events(lease("w2", &["issue_refund"], T0 + 30_010, 10))
        .await
        .unwrap();
    let by_key = |key: &str| {
        leased
            .iter()
            .find(|l| l.event.key == key)
            .unwrap_or_else(|| panic!("{key} leased: {leased:?}"))
    };
    assert!(by_key("taken").taken_over && by_key("taken").event.maybe_applied);
    assert!(!by_key("plain").taken_over && !by_key("plain").event.maybe_applied);
    assert!(by_key("lost").event.maybe_applied, "kept by the lease");
    assert!(event_of(store, "acme", "taken").await.maybe_applied);

    let event = retry("lost", 2, "unavailable", false).await;
    assert!(event.maybe_applied, "kept by a later 503: {event:?}");
    let unknown = error(2, "outcome_unknown");
    let event = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "plain",
            attempt: 2,
            outcome: DeliveryOutcome::Unknown(&unknown),
            now_ms: T0 + 30_020,
            audit: None,
        })
        .await
        .unwrap();
    assert!(event.maybe_applied, "an unknown outcome: {event:?}");

    store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "plain",
            resolution: Resolution::NotApplied,
            now_ms: T0 + 40_000,
        })
        .await
        .unwrap()
        .expect("settled");
    let event = event_of(store, "acme", "plain").await;
    assert!(!event.maybe_applied, "found not applied: {event:?}");
    let leased = store
        .lease_events(lease("w3", &["issue_refund"], T0 + 40_000, 10))
        .await
        .unwrap();
    let plain = leased
        .iter()
        .find(|l| l.event.key == "plain")
        .expect("found not applied: due now");
    assert_eq!(plain.event.attempt, 3);
    assert!(!plain.event.maybe_applied);
}
