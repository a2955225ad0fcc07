//! What every case builds its requests from: one tenant's refund, claimed at a fixed time.

use std::time::Duration;

use toolgate_core::store::{AttemptError, Claim, ClaimRequest, ClaimToken, OperationStore};

/// The time of every case's first request, in milliseconds since the Unix epoch.
pub(super) const T0: i64 = 1_700_000_000_000;

/// The lease every claim asks for.
const LEASE: Duration = Duration::from_secs(30);

/// A claim of `key` for `tenant` by a refund, at `now_ms`, without takeover.
pub(super) fn request<'a>(
    tenant: &'a str,
    key: &'a str,
    hash: &'a str,
    now_ms: i64,
) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant,
        key,
        tool: "issue_refund",
        request_hash: hash,
        arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
        now_ms,
        lease: LEASE,
        takeover: false,
        approval: None,
    }
}

/// The claim on `key` held by `attempt`.
pub(super) fn owner(tenant: &str, key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: tenant.into(),
        key: key.into(),
        attempt,
    }
}

/// The error of `attempt`, of `kind`.
pub(super) fn error(attempt: u32, kind: &str) -> AttemptError {
    AttemptError {
        attempt,
        kind: kind.into(),
        what: format!("attempt {attempt} failed"),
    }
}

/// Claims `req`, which must be acquired; answers the attempt.
pub(super) async fn acquire(store: &dyn OperationStore, req: ClaimRequest<'_>) -> u32 {
    match store.claim(req).await.expect("claim") {
        Claim::Acquired { attempt, .. } => attempt,
        other => panic!("expected to acquire {}, got {other:?}", req.key),
    }
}
