//! What a store wrote is still there when the file is opened again (the process restarted).

use std::time::Duration;

use toolgate_core::store::prelude::*;

use toolgate_core::store::{
    AttemptError, Claim, ClaimRequest, ClaimToken, OperationState, RetryNote, StoreError, Success,
};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

fn request(key: &str, now_ms: i64) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

fn owner(key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: "acme".into(),
        key: key.into(),
        attempt,
    }
}

async fn acquire(store: &SqliteStore, req: ClaimRequest<'_>) -> u32 {
    match store.claim(req).await.expect("claim") {
        Claim::Acquired { attempt, .. } => attempt,
        other => panic!("expected to acquire {}, got {other:?}", req.key),
    }
}

#[tokio::test]
async fn a_settled_record_survives_dropping_the_store_and_a_replay_gets_its_result()
-> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let error = AttemptError {
        attempt: 1,
        kind: "unavailable".into(),
        what: "503 from the provider".into(),
    };
    {
        let store = SqliteStore::open(&path).await?;
        let attempt = acquire(&store, request("refund", T0)).await;
        store
            .record_retry(RetryNote {
                owner: &owner("refund", attempt),
                error: &error,
                lease_until_ms: T0 + 40_000,
            })
            .await?;
        store
            .succeed(Success {
                owner: &owner("refund", attempt),
                result: r#"{"refund_id":"re_1"}"#,
                now_ms: T0 + 5,
                audit: None,
            })
            .await?;
        // Dropped without `close`: whatever was committed must be on disk already.
    }

    let store = SqliteStore::open(&path).await?;
    let record = store
        .get("acme", "refund")
        .await?
        .expect("the record is kept");
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.result.as_deref(), Some(r#"{"refund_id":"re_1"}"#));
    assert_eq!(record.errors, vec![error]);
    assert_eq!(record.arguments, r#"{"amount":500,"order_id":"ORD-1001"}"#);
    assert_eq!((record.created_ms, record.updated_ms), (T0, T0 + 5));
    match store.claim(request("refund", T0 + 60_000)).await? {
        Claim::Existing(replayed) => assert_eq!(replayed, record),
        other => panic!("a replay after reopening ran again: {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_claim_open_when_the_process_stopped_becomes_unknown_and_is_not_run_again()
-> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    {
        let store = SqliteStore::open(&path).await?;
        assert_eq!(acquire(&store, request("refund", T0)).await, 1);
        store.close().await;
    }

    let store = SqliteStore::open(&path).await?;
    let record = store
        .get("acme", "refund")
        .await?
        .expect("the claim is kept");
    assert_eq!(
        (record.state, record.attempt),
        (OperationState::Processing, 1)
    );
    assert_eq!(record.lease_until_ms, T0 + 30_000);
    // The worker died with the process; once its lease ends the call may have happened.
    match store.claim(request("refund", T0 + 30_000)).await? {
        Claim::Existing(record) => assert_eq!(record.state, OperationState::OutcomeUnknown),
        other => panic!("a crashed claim was run again: {other:?}"),
    }
    assert_eq!(store.list_unknown(10).await?.len(), 1);
    Ok(())
}
