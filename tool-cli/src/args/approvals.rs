//! The `approvals` commands: `list`, `show`, `approve` and `reject`.

use clap::{Args, Subcommand};
use toolgate_core::store::ApprovalStatus;

use super::{StatusFilter, status_or_all};
use crate::identity::TokenArg;
use crate::json::Output;

/// `approvals …`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Approvals {
    /// List approvals, oldest first (default: the pending ones of every tenant)
    List(ListApprovals),
    /// Show everything about one approval: the call, its requester, its decisions
    Show(ShowApproval),
    /// Approve an operation: it runs at the next call of the model with the same arguments, or
    /// by the application's runner
    #[command(after_help = DECIDE_HELP)]
    Approve(DecideArgs),
    /// Reject an operation: it never runs; the model's next identical call is told so
    #[command(after_help = DECIDE_HELP)]
    Reject(DecideArgs),
}

/// `approvals list`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ListApprovals {
    /// Only approvals in this status (`all`: every status)
    #[arg(
        long,
        value_name = "STATUS",
        default_value = "pending",
        value_parser = statuses()
    )]
    pub(crate) status: StatusFilter<ApprovalStatus>,
    /// Only this tenant's approvals
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// `approvals show ID`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ShowApproval {
    /// The approval's id (apr_…)
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// Show it only if it is this tenant's
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// `approvals approve ID` or `approvals reject ID`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct DecideArgs {
    /// The approval's id (apr_…)
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// Why, stored with the decision and in the audit trail
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: String,
    #[command(flatten)]
    pub(crate) operator: TokenArg,
}

const DECIDE_HELP: &str = "\
The approver is whom the operator token names (--token, or TOOLGATE_TOKEN): a token the
tenant's issuer signed with a key the store holds, issued with `toolgate operators issue`. The
token's subject is recorded as the approver, its issuer with the decision. The approver must
belong to the approval's tenant, hold its approval permission (shown by `approvals show`), and
not be its requester. An expired token, or one no key of its tenant in the store verifies, is
refused before anything is decided.

Exit codes: 0 decided, 1 refused (the reason is printed), 2 usage error (no token), 3 store
error.";

/// `pending`, `approved`, `rejected` or `all`.
fn statuses() -> impl clap::builder::TypedValueParser<Value = StatusFilter<ApprovalStatus>> {
    status_or_all(
        [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Rejected,
        ],
        ApprovalStatus::as_str,
        ApprovalStatus::parse,
    )
}
