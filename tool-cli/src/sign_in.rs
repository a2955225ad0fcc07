//! Signing an operator in: a token an issuer signed, checked against the issuer keys the store
//! holds for the tenant the token claims. Every command that acts, and the console's sign-in page,
//! sign their operator in here.

use toolgate_core::identity::{IdentityError, Operator, TokenVerifier};
use toolgate_core::store::{AuditEntry, AuditKind, OperationStore};

use crate::error::Failure;
use crate::time::{now_ms, rfc3339};

/// What a command that acts was asked to act on: the record of a refused sign-in names it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// `approvals approve|reject ID`: the approval.
    Approval(&'a str),
    /// `ops settle KEY`, `outbox resume KEY`: the operation's key.
    Operation(&'a str),
}

/// [`sign_in`] for `command` acting on `target`. A refused token is a refused attempt to act,
/// and leaves an audit record in the tenant the token claims (when it reads that far): a
/// `decision` on the approval, or an `operator` action on the operation, `refused`, with no actor
/// (no one was proven) and the refusal as its reason.
pub(crate) async fn sign_in_to_act(
    store: &dyn OperationStore,
    token: &str,
    command: &str,
    target: Target<'_>,
) -> Result<Operator, Failure> {
    let signed_in = sign_in(store, token, now_ms()).await;
    let (Err(Failure::Refused(refusal)), Ok(tenant)) =
        (&signed_in, TokenVerifier::claimed_tenant(token))
    else {
        return signed_in;
    };
    let mut entry = AuditEntry {
        kind: AuditKind::Operator,
        tenant,
        run_id: String::new(),
        call_id: String::new(),
        tool: String::new(),
        actor: String::new(),
        arguments: "null".to_owned(),
        attempts: 0,
        duration_ms: 0,
        outcome: "refused".to_owned(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: None,
        approval_id: None,
        reason: Some(format!("{command}: {}: {}", refusal.what, refusal.why)),
        at_ms: now_ms(),
    };
    let read = |e| Failure::store(&format!("record the refused `{command}`"), &e);
    match target {
        Target::Approval(id) => {
            entry.kind = AuditKind::Decision;
            entry.approval_id = Some(id.to_owned());
            // In the approval's run's trail, when the claimed tenant has it.
            if let Some(approval) = store.approval(id).await.map_err(read)?
                && approval.tenant == entry.tenant
            {
                entry.run_id = approval.run_id;
                entry.call_id = approval.call_id;
                entry.tool = approval.tool;
                entry.key = Some(approval.key);
            }
        }
        Target::Operation(key) => {
            entry.key = Some(key.to_owned());
            if let Some(record) = store.get(&entry.tenant, key).await.map_err(read)? {
                entry.tool = record.tool;
            }
        }
    }
    store.append_audit(&entry).await.map_err(read)?;
    signed_in
}

/// The operator `token` proves at `now_ms`, or why it is refused: a token that does not read,
/// is unsigned, was signed by a key the store does not hold for its tenant (another key, another
/// tenant's, or changed since), or expired.
pub(crate) async fn sign_in(
    store: &dyn OperationStore,
    token: &str,
    now_ms: i64,
) -> Result<Operator, Failure> {
    let tenant = TokenVerifier::claimed_tenant(token).map_err(|err| refused(&err, None))?;
    let keys = store
        .issuer_keys(&tenant)
        .await
        .map_err(|e| Failure::store(&format!("read the issuer keys of tenant {tenant}"), &e))?;
    Operator::authenticate(&TokenVerifier::new(keys), token, now_ms)
        .map_err(|err| refused(&err, Some(&tenant)))
}

/// The refusal of a token for `err`, the token claiming `tenant` when it reads that far: what to
/// do names the commands that help.
fn refused(err: &IdentityError, tenant: Option<&str>) -> Failure {
    let why = match err {
        IdentityError::Expired { exp } => {
            format!("the token expired at {}", rfc3339(exp.saturating_mul(1000)))
        }
        err => err.to_string(),
    };
    let next = match (err, tenant) {
        (IdentityError::Expired { .. }, _) => {
            "ask whoever holds your issuer's key for a new token (`toolgate operators issue`)"
                .to_owned()
        }
        (IdentityError::ForeignKey(_), Some(tenant)) => format!(
            "use a token issued with a key this store holds for tenant {tenant} (`toolgate operators list --tenant {tenant}` lists them; `toolgate operators init` adds one)"
        ),
        (err, _) => err.next().to_owned(),
    };
    Failure::refused("the operator token is refused", why, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_what_to_do_in_the_command_lines_words() {
        let expired = refused(&IdentityError::Expired { exp: 60 }, Some("acme")).to_string();
        assert!(
            expired.contains("why: the token expired at 1970-01-01T00:01:00.000Z"),
            "{expired}"
        );
        assert!(expired.contains("toolgate operators issue"), "{expired}");
        let foreign = refused(&IdentityError::ForeignKey("no key".into()), Some("acme"));
        assert_eq!(foreign.exit_code(), 1);
        let foreign = foreign.to_string();
        assert!(
            foreign.contains("toolgate operators list --tenant acme"),
            "{foreign}"
        );
        let unsigned = refused(&IdentityError::Unsigned("none".into()), None).to_string();
        assert!(unsigned.contains("not signed with EdDSA"), "{unsigned}");
        assert!(
            unsigned.contains("next: pass the whole token"),
            "{unsigned}"
        );
    }
}
