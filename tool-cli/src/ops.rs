//! `ops list | show`: the stored write operations.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use toolgate_core::store::{OperationQuery, OperationRecord, OperationState, OperationStore};

use crate::error::Failure;
use crate::json::{Output, document, stored};
use crate::table::{Table, or_dash};
use crate::time::rfc3339;

/// `ops list`: the operations in `state`, touched by `run`, of `tenant` (each filter when
/// given), oldest first.
pub(crate) async fn list(
    store: &dyn OperationStore,
    state: Option<OperationState>,
    run: Option<&str>,
    tenant: Option<&str>,
    output: Output,
) -> Result<String, Failure> {
    let query = OperationQuery {
        tenant,
        state,
        run_id: run,
        limit: 0,
    };
    let records = store
        .list_operations(query)
        .await
        .map_err(|e| Failure::store("list the operations", &e))?;
    if output.json {
        return Ok(document(&Value::Array(
            records
                .iter()
                .map(|r| operation_json(r, output.hashes))
                .collect(),
        )));
    }
    if records.is_empty() {
        return Ok("no operations match\n".to_owned());
    }
    let mut table = Table::new(&[
        "TENANT", "KEY", "TOOL", "STATE", "ATTEMPT", "CREATED", "UPDATED", "APPROVAL",
    ]);
    for r in &records {
        table.row(vec![
            r.tenant.clone(),
            r.key.clone(),
            r.tool.clone(),
            r.state.as_str().to_owned(),
            r.attempt.to_string(),
            rfc3339(r.created_ms),
            rfc3339(r.updated_ms),
            or_dash(r.approval_id.as_deref()),
        ]);
    }
    Ok(table.render())
}

/// `ops show KEY`: the operation of `key` in `tenant`, or, without a tenant, in the one tenant
/// that holds the key.
pub(crate) async fn show(
    store: &dyn OperationStore,
    key: &str,
    tenant: Option<&str>,
    output: Output,
) -> Result<String, Failure> {
    let record = match tenant {
        Some(tenant) => store
            .get(tenant, key)
            .await
            .map_err(|e| Failure::store(&format!("read operation {key}"), &e))?,
        None => only_holder(store, key).await?,
    };
    let record = record.ok_or_else(|| {
        let of = tenant
            .map(|t| format!(" of tenant {t}"))
            .unwrap_or_default();
        Failure::refused(
            format!("no operation {key}{of}"),
            "no operation in this store has this key",
            "list the operations with `toolgate ops list`",
        )
    })?;
    if output.json {
        return Ok(document(&operation_json(&record, output.hashes)));
    }
    Ok(describe(&record, output.hashes))
}

/// The one operation of any tenant under `key`; several are a usage error that names the
/// tenants.
async fn only_holder(
    store: &dyn OperationStore,
    key: &str,
) -> Result<Option<OperationRecord>, Failure> {
    // The store reads a key by tenant; without one, every operation is read and filtered here.
    let holders: Vec<OperationRecord> = store
        .list_operations(OperationQuery::default())
        .await
        .map_err(|e| Failure::store(&format!("read operation {key}"), &e))?
        .into_iter()
        .filter(|r| r.key == key)
        .collect();
    only_one(holders, key, |r| &r.tenant)
}

/// The one of `holders` (each the holder of `key` in one tenant, `tenant_of` says which), or
/// none; several are a usage error that names their tenants.
pub(crate) fn only_one<T>(
    mut holders: Vec<T>,
    key: &str,
    tenant_of: impl Fn(&T) -> &String,
) -> Result<Option<T>, Failure> {
    if holders.len() > 1 {
        let tenants: BTreeSet<&str> = holders.iter().map(|h| tenant_of(h).as_str()).collect();
        let tenants: Vec<&str> = tenants.into_iter().collect();
        return Err(Failure::usage(
            format!("several tenants hold the key {key}"),
            format!(
                "a key is per tenant, and {} hold this one",
                tenants.join(", ")
            ),
            "add --tenant TENANT",
        ));
    }
    Ok(holders.pop())
}

/// Every field of `record` as text, one a line, the request hash only with `hashes`; the result
/// last.
fn describe(r: &OperationRecord, hashes: bool) -> String {
    let fields = [
        ("key", r.key.clone()),
        ("tenant", r.tenant.clone()),
        ("tool", r.tool.clone()),
        ("state", r.state.as_str().to_owned()),
        ("attempt", r.attempt.to_string()),
        ("arguments", r.arguments.clone()),
        ("approval", or_dash(r.approval_id.as_deref())),
        ("reconcile tries", r.reconcile_tries.to_string()),
        ("created", rfc3339(r.created_ms)),
        ("updated", rfc3339(r.updated_ms)),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&format!("{name:<16} {value}\n"));
    }
    if hashes {
        out.push_str(&format!("{:<16} {}\n", "request hash", r.request_hash));
    }
    if r.state == OperationState::Processing {
        out.push_str(&format!(
            "{:<16} {}\n",
            "lease until",
            rfc3339(r.lease_until_ms)
        ));
    }
    if r.errors.is_empty() {
        out.push_str("errors           none\n");
    } else {
        out.push_str("errors\n");
        let mut table = Table::new(&["  ATTEMPT", "KIND", "WHAT"]);
        for e in &r.errors {
            table.row(vec![
                format!("  {}", e.attempt),
                e.kind.clone(),
                e.what.clone(),
            ]);
        }
        out.push_str(&table.render());
    }
    out.push_str(&format!(
        "{:<16} {}\n",
        "result",
        or_dash(r.result.as_deref())
    ));
    out
}

/// `record` as JSON: every field, the arguments and result embedded as JSON; the request hash
/// only with `hashes`.
fn operation_json(r: &OperationRecord, hashes: bool) -> Value {
    let mut value = json!({
        "tenant": r.tenant,
        "key": r.key,
        "tool": r.tool,
        "state": r.state.as_str(),
        "attempt": r.attempt,
        "arguments": stored(&r.arguments),
        "approval_id": r.approval_id,
        "result": r.result.as_deref().map(stored),
        "errors": r.errors.iter().map(|e| json!({
            "attempt": e.attempt,
            "kind": e.kind,
            "what": e.what,
        })).collect::<Vec<_>>(),
        "reconcile_tries": r.reconcile_tries,
        "lease_until_ms": r.lease_until_ms,
        "created_ms": r.created_ms,
        "created_at": rfc3339(r.created_ms),
        "updated_ms": r.updated_ms,
        "updated_at": rfc3339(r.updated_ms),
    });
    if hashes && let Some(fields) = value.as_object_mut() {
        fields.insert("request_hash".into(), r.request_hash.clone().into());
    }
    value
}

#[cfg(test)]
mod tests {
    use toolgate_core::store::AttemptError;

    use super::*;

    fn record() -> OperationRecord {
        OperationRecord {
            tenant: "acme".into(),
            key: "refund:ORD-1002".into(),
            tool: "issue_refund".into(),
            request_hash: "h1".into(),
            arguments: r#"{"amount":"80.00"}"#.into(),
            state: OperationState::Succeeded,
            attempt: 2,
            lease_until_ms: 0,
            result: Some(r#"{"refund_id":"rf_1"}"#.into()),
            errors: vec![AttemptError {
                attempt: 1,
                kind: "timeout".into(),
                what: "no answer in 5s".into(),
            }],
            reconcile_tries: 0,
            created_ms: 0,
            updated_ms: 1000,
            approval_id: None,
        }
    }

    #[test]
    fn show_names_every_field_errors_and_result() {
        let text = describe(&record(), false);
        for expected in [
            "key              refund:ORD-1002",
            "state            succeeded",
            "attempt          2",
            "approval         -",
            "updated          1970-01-01T00:00:01.000Z",
            "  1        timeout  no answer in 5s",
            r#"result           {"refund_id":"rf_1"}"#,
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
        assert!(
            !text.contains("lease until"),
            "only a processing record has a lease"
        );
    }

    #[test]
    fn the_request_hash_is_printed_only_when_asked() {
        assert!(!describe(&record(), false).contains("h1"));
        assert!(describe(&record(), true).contains("request hash     h1\n"));
        assert!(
            operation_json(&record(), false)
                .get("request_hash")
                .is_none()
        );
        assert_eq!(operation_json(&record(), true)["request_hash"], "h1");
    }

    #[test]
    fn json_embeds_the_result() {
        let value = operation_json(&record(), false);
        assert_eq!(value["result"]["refund_id"], "rf_1");
        assert_eq!(value["errors"][0]["kind"], "timeout");
        assert_eq!(value["approval_id"], Value::Null);
    }
}
