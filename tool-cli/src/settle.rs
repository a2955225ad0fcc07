//! `ops settle`: an operator's settlement of an operation whose outcome is unknown, as applied or
//! not, with the evidence, audited.

use serde_json::json;
use toolgate_core::identity::Operator;
use toolgate_core::store::{
    OperationRecord, OperationState, OperationStore, Resolution, ResolveRequest,
};

use crate::error::Failure;
use crate::identity;
use crate::json::document;
use crate::operator_audit::{self, Action};
use crate::time::now_ms;

/// The permission an operator needs to settle an unknown outcome.
pub(crate) const SETTLE_PERMISSION: &str = "ops:settle";

/// What an operator settles: the operation `key`, as `applied` or not, on `evidence`; printed as
/// JSON with `json`.
pub(crate) struct Settlement<'a> {
    pub(crate) key: &'a str,
    pub(crate) applied: bool,
    pub(crate) evidence: &'a str,
    pub(crate) json: bool,
}

/// `ops settle KEY`, as `operator`: an `outcome_unknown` operation of the operator's tenant
/// becomes `succeeded` (`--applied`) or `failed` (`--not-applied`), as the reconciler would
/// settle it. The settlement, or the refusal of it, appends an audit record (kind `operator`).
pub(crate) async fn settle(
    store: &dyn OperationStore,
    args: &Settlement<'_>,
    operator: &Operator,
) -> Result<String, Failure> {
    let done = settle_operation(store, args, operator).await;
    let (outcome, tool) = match &done {
        Ok(record) => ("settled", record.tool.clone()),
        Err(Failure::Refused(_)) => ("refused", String::new()),
        // The store failed: it takes no record either.
        Err(_) => return done.map(|_| String::new()),
    };
    let reason = match &done {
        Err(Failure::Refused(refusal)) => format!(
            "ops settle {}: {}: {}",
            outcome_word(args),
            refusal.what,
            refusal.why
        ),
        _ => format!("ops settle {}: {}", outcome_word(args), args.evidence),
    };
    let action = Action {
        command: "ops settle",
        operator,
        key: args.key,
        tool,
        outcome,
        reason,
    };
    operator_audit::record(store, action).await?;
    let record = done?;
    if args.json {
        return Ok(document(&json!({
            "tenant": record.tenant,
            "key": record.key,
            "tool": record.tool,
            "state": record.state.as_str(),
            "settled_by": operator.subject(),
            "evidence": args.evidence,
        })));
    }
    Ok(format!(
        "operation {} of tenant {} settled as {} by {}: {}\n",
        record.key,
        record.tenant,
        outcome_word(args),
        operator.subject(),
        record.state.as_str()
    ))
}

/// `applied` or `not applied`, as asked.
fn outcome_word(args: &Settlement<'_>) -> &'static str {
    if args.applied {
        "applied"
    } else {
        "not applied"
    }
}

/// The settlement itself: the record after it.
async fn settle_operation(
    store: &dyn OperationStore,
    args: &Settlement<'_>,
    operator: &Operator,
) -> Result<OperationRecord, Failure> {
    let key = args.key;
    let tenant = operator.tenant();
    identity::operator_may(
        operator,
        SETTLE_PERMISSION,
        "settle",
        &format!("the operation {key}"),
    )?;
    let before = store
        .get(tenant, key)
        .await
        .map_err(|e| Failure::store(&format!("read operation {key}"), &e))?
        .ok_or_else(|| not_found(key, tenant))?;
    if before.state != OperationState::OutcomeUnknown {
        return Err(not_unknown(&before));
    }
    // What a call again with the key is answered with: who settled it, and on what evidence.
    let applied = json!({"settled_by": operator.subject(), "evidence": args.evidence}).to_string();
    let resolution = if args.applied {
        Resolution::Applied(&applied)
    } else {
        Resolution::NotApplied
    };
    let request = ResolveRequest {
        tenant,
        key,
        resolution,
        now_ms: now_ms(),
    };
    match store.resolve(request).await {
        Ok(Some(after)) => Ok(after),
        // Settled between the read and now (the reconciler, or another operator).
        Ok(None) => Err(settled_meanwhile(store, key, tenant).await),
        Err(e) => Err(Failure::store(&format!("settle operation {key}"), &e)),
    }
}

fn not_found(key: &str, tenant: &str) -> Failure {
    Failure::refused(
        format!("no operation {key} of tenant {tenant}"),
        "an operator settles only an operation of their own tenant, and none has this key",
        "list the unknown outcomes with `toolgate ops list --status outcome_unknown`",
    )
}

fn not_unknown(record: &OperationRecord) -> Failure {
    Failure::refused(
        format!(
            "the operation {} is {}, not outcome_unknown",
            record.key,
            record.state.as_str()
        ),
        "only an operation whose outcome is unknown is settled by hand; any other state is the store's own account of it",
        format!(
            "look at it with `toolgate ops show {} --tenant {}`",
            record.key, record.tenant
        ),
    )
}

/// The refusal of a settlement that found the operation settled already.
async fn settled_meanwhile(store: &dyn OperationStore, key: &str, tenant: &str) -> Failure {
    match store.get(tenant, key).await {
        Ok(Some(record)) => not_unknown(&record),
        _ => not_found(key, tenant),
    }
}
