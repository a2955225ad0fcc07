//! The `ops` commands: `list`, `show` and `settle`.

use clap::{ArgGroup, Args, Subcommand};
use toolgate_core::store::OperationState;

use super::{StatusFilter, status_or_all};
use crate::identity::TokenArg;
use crate::json::Output;

/// `ops …`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Ops {
    /// List operations, oldest first
    List(ListOps),
    /// Show one operation: its state, attempts, errors and result
    Show(ShowOperation),
    /// Settle an operation whose outcome is unknown, as applied or not, with the evidence
    #[command(after_help = SETTLE_HELP)]
    Settle(SettleArgs),
}

/// `ops list`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ListOps {
    /// Only operations in this state (`all`, or no --status: every state)
    #[arg(long, value_name = "STATE", value_parser = states())]
    pub(crate) status: Option<StatusFilter<OperationState>>,
    /// Only operations a call of this run touched (by the audit trail)
    #[arg(long, value_name = "RUN")]
    pub(crate) run: Option<String>,
    /// Only this tenant's operations
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// `ops show KEY`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ShowOperation {
    /// The operation's idempotency key
    #[arg(value_name = "KEY")]
    pub(crate) key: String,
    /// The tenant holding the key (needed when several do)
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// `ops settle KEY (--applied | --not-applied) --evidence TEXT`.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(group(ArgGroup::new("outcome").required(true).args(["applied", "not_applied"])))]
pub(crate) struct SettleArgs {
    /// The operation's idempotency key
    #[arg(value_name = "KEY")]
    pub(crate) key: String,
    /// The provider applied the operation: it becomes `succeeded`
    #[arg(long)]
    pub(crate) applied: bool,
    /// The provider did not apply it: it becomes `failed`, and a call again may run it
    #[arg(long)]
    pub(crate) not_applied: bool,
    /// What shows it (a provider's reference, a ledger line), kept in the audit record and, for
    /// an applied operation, in the result the model is answered with
    #[arg(long, value_name = "TEXT")]
    pub(crate) evidence: String,
    #[command(flatten)]
    pub(crate) operator: TokenArg,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

const SETTLE_HELP: &str = "\
The operator is whom the operator token names (--token, or TOOLGATE_TOKEN): a token the
tenant's issuer signed with a key the store holds, issued with `toolgate operators issue`
holding the permission ops:settle. The operator settles only an operation of the token's
tenant; an expired token, or one no key of its tenant in the store verifies, is refused before
anything is settled.

Only an operation whose outcome is unknown is settled. --applied: it becomes succeeded, with the
result {\"settled_by\": SUBJECT, \"evidence\": TEXT}, which a call again with its key is answered
with (an outbox operation's event becomes delivered). --not-applied: it becomes failed (an outbox
operation's event is pending again; an operation with steps is partial if one succeeded), and a
call again with its key runs it afresh. Look at the provider before you settle: the reconciler
asks it by itself where the tool has a reconcile hook. Any other state is refused, and the
refusal says which it is. The settlement, or its refusal, appends an audit record of kind
`operator` (the token's subject, the key, `settled` or `refused`, the outcome and the
evidence).

Exit codes: 0 settled, 1 refused (the reason is printed), 2 usage error (no token, no evidence),
3 store error.";

/// Every [`OperationState`] by its stored name, or `all`.
fn states() -> impl clap::builder::TypedValueParser<Value = StatusFilter<OperationState>> {
    status_or_all(
        OperationState::ALL,
        OperationState::as_str,
        OperationState::parse,
    )
}
