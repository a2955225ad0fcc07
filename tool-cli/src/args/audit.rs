//! The `audit` command.

use clap::Args;

/// `audit RUN`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct AuditArgs {
    /// The run id
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// The tenant of the run (needed when several tenants have a run of this id)
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}
