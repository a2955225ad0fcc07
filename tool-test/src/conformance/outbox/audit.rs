//! A delivery settled with its audit record: both written together, or neither.

use toolgate_core::store::EventSettlement;

use toolgate_core::store::{
    AuditEntry, AuditKind, AuditQuery, DeliveryOutcome, EventStatus, OperationState,
    OperationStore, StoreError,
};

use super::{PAID, event_of, lease_one, queue};
use crate::conformance::fixture::{T0, entry, error};

/// A delivery settled with its audit record: the event, its operation and the record are
/// written, the record read back whole; under a lease no longer held, none is, and the store
/// answers `LostClaim`.
pub async fn a_delivery_and_its_audit_record_are_settled_together(store: &dyn OperationStore) {
    queue(store, "acme", "k-delivery", "issue_refund", T0).await;
    let attempt = lease_one(store, "k-delivery", T0 + 10).await;
    let delivered = AuditEntry {
        kind: AuditKind::Delivery,
        run_id: String::new(),
        call_id: String::new(),
        actor: "worker-«1»".into(),
        arguments: "null".into(),
        attempts: attempt,
        outcome: "delivered".into(),
        bytes: u64::try_from(PAID.len()).expect("a short answer"),
        ..entry("acme", "", "", Some("k-delivery"), T0 + 20)
    };
    let event = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "k-delivery",
            attempt,
            outcome: DeliveryOutcome::Delivered(PAID),
            now_ms: T0 + 20,
            audit: Some(&delivered),
        })
        .await
        .expect("settle the delivery with its audit record");
    assert_eq!(event.status, EventStatus::Delivered);
    assert_eq!(event.result.as_deref(), Some(PAID));
    let record = store
        .get("acme", "k-delivery")
        .await
        .expect("read the record")
        .expect("the record is there");
    assert_eq!(record.state, OperationState::Succeeded);
    let query = AuditQuery {
        key: Some("k-delivery"),
        ..AuditQuery::default()
    };
    let written = store.audit(query).await.expect("read the audit trail");
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].entry, delivered);

    // The lease is settled: a second outcome under it writes nothing, audit record included.
    let dead = AuditEntry {
        outcome: "dead".into(),
        ..delivered.clone()
    };
    let lost = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "k-delivery",
            attempt,
            outcome: DeliveryOutcome::Dead(&error(attempt, "refused")),
            now_ms: T0 + 30,
            audit: Some(&dead),
        })
        .await
        .expect_err("the lease is no longer held");
    assert!(matches!(lost, StoreError::LostClaim { .. }), "{lost:?}");
    assert_eq!(event_of(store, "acme", "k-delivery").await, event);
    let written = store.audit(query).await.expect("read the audit trail");
    assert_eq!(written.len(), 1, "no second record: {written:?}");
}
