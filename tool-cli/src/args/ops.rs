//! The `ops` commands: `list` and `show`.

use clap::{Args, Subcommand};
use toolgate_core::store::OperationState;

use super::status;
use crate::json::Output;

/// `ops …`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Ops {
    /// List operations, oldest first
    List(ListOps),
    /// Show one operation: its state, attempts, errors and result
    Show(ShowOperation),
}

/// `ops list`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ListOps {
    /// Only operations in this state
    #[arg(long, value_name = "STATE", value_parser = states())]
    pub(crate) status: Option<OperationState>,
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

/// Every [`OperationState`], by its stored name.
fn states() -> impl clap::builder::TypedValueParser<Value = OperationState> {
    status(
        OperationState::ALL,
        OperationState::as_str,
        OperationState::parse,
    )
}
