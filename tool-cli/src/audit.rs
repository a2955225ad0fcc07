//! `audit RUN`: a run's audit trail, its calls, the decisions on its approvals, and what was done
//! to its operations outside any run (outbox deliveries, operator actions), in the order they
//! were appended.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use toolgate_core::store::{AuditQuery, AuditRecord, OperationStore, StoreError};

use crate::error::Failure;
use crate::json::{document, stored};
use crate::table::{Table, or_dash};
use crate::time::rfc3339;

/// `audit RUN`: the audit records of `run` (of `tenant`, or of the one tenant that has a run of
/// this id), with those of its operations' outbox deliveries and operator actions, in order.
pub(crate) async fn trail(
    store: &dyn OperationStore,
    run: &str,
    tenant: Option<&str>,
    json: bool,
) -> Result<String, Failure> {
    let query = AuditQuery {
        tenant,
        run_id: Some(run),
        key: None,
        limit: 0,
    };
    let doing = format!("read the audit trail of run {run}");
    let records = store
        .audit(query)
        .await
        .map_err(|e| Failure::store(&doing, &e))?;
    let tenants: BTreeSet<&str> = records.iter().map(|r| r.entry.tenant.as_str()).collect();
    if tenants.len() > 1 {
        let tenants: Vec<&str> = tenants.into_iter().collect();
        return Err(Failure::usage(
            format!("several tenants have a run {run}"),
            format!(
                "run ids are per tenant, and {} have this one",
                tenants.join(", ")
            ),
            "add --tenant TENANT",
        ));
    }
    if records.is_empty() {
        let of = tenant
            .map(|t| format!(" of tenant {t}"))
            .unwrap_or_default();
        return Err(Failure::refused(
            format!("no audit records for run {run}{of}"),
            "no call of this run and no decision on its approvals is in the store (or retention purged them)",
            "check the run id (the session's run id), and the tenant",
        ));
    }
    let records = with_operations(store, records)
        .await
        .map_err(|e| Failure::store(&doing, &e))?;
    if json {
        return Ok(document(&Value::Array(
            records.iter().map(record_json).collect(),
        )));
    }
    let mut table = Table::new(&[
        "SEQ", "TIME", "KIND", "CALL", "TOOL", "OUTCOME", "ATTEMPTS", "DURATION", "BYTES",
        "REPLAYED", "KEY", "APPROVAL", "ACTOR", "REASON",
    ]);
    for r in &records {
        let e = &r.entry;
        let outcome = match &e.error_kind {
            Some(kind) => format!("{} ({kind})", e.outcome),
            None => e.outcome.clone(),
        };
        table.row(vec![
            r.seq.to_string(),
            rfc3339(e.at_ms),
            e.kind.as_str().to_owned(),
            e.call_id.clone(),
            e.tool.clone(),
            outcome,
            e.attempts.to_string(),
            format!("{}ms", e.duration_ms),
            e.bytes.to_string(),
            if e.replayed { "yes" } else { "no" }.to_owned(),
            or_dash(e.key.as_deref()),
            or_dash(e.approval_id.as_deref()),
            e.actor.clone(),
            or_dash(e.reason.as_deref()),
        ]);
    }
    let tenant = records.first().map_or("", |r| r.entry.tenant.as_str());
    Ok(format!("run {run} of tenant {tenant}\n{}", table.render()))
}

/// `records` (of one run of one tenant), with the records of their operations that belong to no
/// run (an outbox delivery, an operator's action), in the order they were appended.
pub(crate) async fn with_operations(
    store: &dyn OperationStore,
    mut records: Vec<AuditRecord>,
) -> Result<Vec<AuditRecord>, StoreError> {
    let Some(tenant) = records.first().map(|r| r.entry.tenant.clone()) else {
        return Ok(records);
    };
    let keys: BTreeSet<String> = records.iter().filter_map(|r| r.entry.key.clone()).collect();
    for key in &keys {
        let query = AuditQuery {
            tenant: Some(&tenant),
            run_id: None,
            key: Some(key),
            limit: 0,
        };
        let found = store.audit(query).await?;
        records.extend(found.into_iter().filter(|r| r.entry.run_id.is_empty()));
    }
    records.sort_by_key(|r| r.seq);
    records.dedup_by_key(|r| r.seq);
    Ok(records)
}

/// `record` as JSON: every field, the (redacted) arguments embedded as JSON.
fn record_json(r: &AuditRecord) -> Value {
    let e = &r.entry;
    json!({
        "seq": r.seq,
        "kind": e.kind.as_str(),
        "tenant": e.tenant,
        "run_id": e.run_id,
        "call_id": e.call_id,
        "tool": e.tool,
        "actor": e.actor,
        "arguments": stored(&e.arguments),
        "attempts": e.attempts,
        "duration_ms": e.duration_ms,
        "outcome": e.outcome,
        "error_kind": e.error_kind,
        "replayed": e.replayed,
        "bytes": e.bytes,
        "key": e.key,
        "approval_id": e.approval_id,
        "reason": e.reason,
        "at_ms": e.at_ms,
        "at": rfc3339(e.at_ms),
    })
}
