//! The claim a write's attempts run under.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use crate::store::{ClaimToken, OperationStore};

/// The claim a write runs under: where its attempts record their errors, and under which
/// attempt of the operation.
pub(super) struct HeldClaim<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) owner: &'a ClaimToken,
    /// How long the claim holds; each retry renews it.
    pub(super) lease: Duration,
    /// The attempt running now (1 for the first), for a panic to be recorded under.
    pub(super) attempt: AtomicU32,
}

/// The claim of the key `k1` of the tool `refund` for the tenant `acme`, made in `store`: for the
/// unit tests of the stages that run under a claim.
#[cfg(test)]
pub(super) async fn claim_for_test(store: &dyn OperationStore, now_ms: i64) -> ClaimToken {
    use crate::store::{Claim, ClaimRequest};

    let request = ClaimRequest {
        tenant: "acme",
        key: "k1",
        tool: "refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: "{}",
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    };
    let Claim::Acquired { attempt, .. } = store.claim(request).await.unwrap() else {
        panic!("the key is free");
    };
    ClaimToken {
        tenant: "acme".to_owned(),
        key: "k1".to_owned(),
        attempt,
    }
}
