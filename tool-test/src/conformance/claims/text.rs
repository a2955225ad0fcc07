//! Every text a store is given comes back as it was given: a NUL and the other control
//! characters in an error's words, in a result and in the arguments.

use serde_json::json;

use crate::conformance::fixture::{T0, acquire, owner, request};
use toolgate_core::store::{
    AttemptError, AttemptFailure, OperationStore, Resolution, ResolveRequest, RetryNote, Success,
};

/// Words with every kind of character a tool may write: NUL, other C0 controls, DEL, C1,
/// quotes, a backslash, the line separators JavaScript chokes on, and characters outside the
/// Basic Multilingual Plane.
const AWKWARD: &str = "nul \0 bell \u{7} backspace \u{8} esc \u{1b} unit \u{1f} del \u{7f} \
     c1 \u{85}\u{9f} newline \n return \r tab \t quote \" apostrophe ' backslash \\ \
     slash / seps \u{2028}\u{2029} bom \u{feff} crab \u{1f980} end \0";

fn awkward_error(attempt: u32, kind: &str) -> AttemptError {
    AttemptError {
        attempt,
        kind: kind.into(),
        what: format!("{AWKWARD} (attempt {attempt})"),
    }
}

/// Errors (retried and final), arguments and results round-trip, NUL included.
pub async fn every_text_round_trips_whatever_its_characters(store: &dyn OperationStore) {
    let arguments = json!({"note": AWKWARD, "order_id": "ORD-1001"}).to_string();
    let result = json!({"refund_id": "re_1", "memo": AWKWARD}).to_string();
    assert!(arguments.contains("\\u0000") && result.contains("\\u0000"));

    let mut req = request("acme", "k1", "h1", T0);
    req.arguments = &arguments;
    let first = acquire(store, req).await;
    let me = owner("acme", "k1", first);
    store
        .record_retry(RetryNote {
            owner: &me,
            error: &awkward_error(1, "unavailable"),
            lease_until_ms: T0 + 40_000,
        })
        .await
        .unwrap();
    store
        .fail(AttemptFailure {
            owner: &me,
            error: &awkward_error(2, "refused"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.arguments, arguments);
    assert_eq!(
        record.errors,
        vec![awkward_error(1, "unavailable"), awkward_error(2, "refused")]
    );

    req.now_ms = T0 + 2;
    let second = acquire(store, req).await;
    store
        .succeed(Success {
            owner: &owner("acme", "k1", second),
            result: &result,
            now_ms: T0 + 3,
            audit: None,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.result.as_deref(), Some(result.as_str()));
    assert_eq!(record.errors.len(), 2, "{:?}", record.errors);

    let mut req = request("acme", "k2", "h1", T0);
    req.arguments = &arguments;
    let attempt = acquire(store, req).await;
    store
        .mark_unknown(AttemptFailure {
            owner: &owner("acme", "k2", attempt),
            error: &awkward_error(1, "outcome_unknown"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let listed = store.list_unknown(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].errors, vec![awkward_error(1, "outcome_unknown")]);
    assert_eq!(listed[0].arguments, arguments);
    let settled = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "k2",
            resolution: Resolution::Applied(&result),
            now_ms: T0 + 2,
        })
        .await
        .unwrap()
        .expect("settled");
    assert_eq!(settled.result.as_deref(), Some(result.as_str()));
    assert_eq!(settled.errors, vec![awkward_error(1, "outcome_unknown")]);
}
