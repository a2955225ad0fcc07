//! When a lease ends, for `expire_leases`: at its `lease_until_ms`, as for `claim` (which the
//! conformance suite pins; it leaves the sweep's boundary open).

use std::time::Duration;

use toolgate_core::store::prelude::*;

use toolgate_core::store::{Claim, ClaimRequest, OperationState, StoreError};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

fn request(key: &str, now_ms: i64) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: "{}",
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

#[tokio::test]
async fn expire_leases_ends_a_lease_at_its_last_millisecond_as_claim_does() -> Result<(), StoreError>
{
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(dir.path().join("operations.db")).await?;
    for key in ["swept", "also-swept"] {
        assert_eq!(
            store.claim(request(key, T0)).await?,
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
    }
    let lease_until = T0 + 30_000;

    assert_eq!(store.expire_leases(lease_until - 1).await?, 0, "still live");
    assert_eq!(store.expire_leases(lease_until).await?, 2);
    let swept = store.get("acme", "swept").await?.expect("kept");
    assert_eq!(swept.state, OperationState::OutcomeUnknown);
    assert_eq!(swept.updated_ms, lease_until);
    Ok(())
}
