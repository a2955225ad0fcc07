//! What an operator's action (`outbox resume`, `ops settle`), or a refused attempt at one, leaves
//! in the audit trail: a record of kind `operator` in the operator's tenant.

use toolgate_core::identity::Operator;
use toolgate_core::store::{AuditEntry, AuditKind, OperationStore};

use crate::error::Failure;
use crate::time::now_ms;

/// An operator's action on the operation `key`.
pub(crate) struct Action<'a> {
    /// The command, as the error of a failed append names it (`outbox resume`).
    pub(crate) command: &'a str,
    pub(crate) operator: &'a Operator,
    pub(crate) key: &'a str,
    /// The operation's tool, when the action found it.
    pub(crate) tool: String,
    /// What it came to (`resumed`, `settled`, `refused`).
    pub(crate) outcome: &'a str,
    /// Why, or what the refusal said.
    pub(crate) reason: String,
}

/// Appends the record of `action`.
pub(crate) async fn record(store: &dyn OperationStore, action: Action<'_>) -> Result<(), Failure> {
    let entry = AuditEntry {
        kind: AuditKind::Operator,
        tenant: action.operator.tenant().to_owned(),
        run_id: String::new(),
        call_id: String::new(),
        tool: action.tool,
        actor: action.operator.subject().to_owned(),
        arguments: "null".to_owned(),
        attempts: 0,
        duration_ms: 0,
        outcome: action.outcome.to_owned(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: Some(action.key.to_owned()),
        approval_id: None,
        reason: Some(action.reason),
        at_ms: now_ms(),
    };
    store.append_audit(&entry).await.map_err(|e| {
        Failure::store(
            &format!(
                "append the audit record of `{}` ({})",
                action.command, action.outcome
            ),
            &e,
        )
    })?;
    Ok(())
}
