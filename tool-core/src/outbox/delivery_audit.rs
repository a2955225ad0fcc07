//! The audit record of one outbox delivery attempt: which event, which worker, what it came to.

use crate::store::{AuditEntry, AuditKind, OutboxEvent};

use super::verdict::Verdict;

/// The audit record of `worker`'s delivery of `event` (under its current attempt), which ended
/// in `verdict` and was recorded as `outcome` (`delivered`, `retrying`, `dead`, `unknown`,
/// `lost`, or `unrecorded` when the store failed to record it), from `started_ms` to `now_ms`.
pub(super) fn delivery_entry(
    worker: &str,
    event: &OutboxEvent,
    verdict: &Verdict,
    outcome: &str,
    started_ms: i64,
    now_ms: i64,
) -> AuditEntry {
    let (error, bytes) = match verdict {
        Verdict::Delivered(answer) => (None, answer.len()),
        Verdict::Retry { error, .. } | Verdict::Dead(error) | Verdict::Unknown(error) => {
            (Some(error), 0)
        }
    };
    AuditEntry {
        kind: AuditKind::Delivery,
        tenant: event.tenant.clone(),
        run_id: String::new(),
        call_id: String::new(),
        tool: event.tool.clone(),
        actor: worker.to_owned(),
        arguments: "null".to_owned(),
        attempts: event.attempt,
        duration_ms: u64::try_from(now_ms.saturating_sub(started_ms)).unwrap_or(0),
        outcome: outcome.to_owned(),
        error_kind: error.map(|error| error.kind.clone()),
        replayed: false,
        bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
        key: Some(event.key.clone()),
        approval_id: None,
        reason: error.map(|error| error.what.clone()),
        at_ms: now_ms,
    }
}
