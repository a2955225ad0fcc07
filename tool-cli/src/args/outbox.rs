//! The `outbox` commands: `list`, `show` and `resume`.

use clap::{Args, Subcommand};
use toolgate_core::store::EventStatus;

use super::{StatusFilter, status_or_all};
use crate::identity::TokenArg;

/// `outbox …`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Outbox {
    /// List outbox events, oldest first (default: every status, every tenant)
    List(ListEvents),
    /// Show one outbox event: its status, attempts, last error and the provider's answer
    Show(ShowEvent),
    /// Resume a dead outbox event: pending again, delivered at the next worker pass (needs
    /// outbox:resume)
    #[command(after_help = RESUME_HELP)]
    Resume(ResumeArgs),
}

/// `outbox list`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ListEvents {
    /// Only events in this status (`all`: every status)
    #[arg(long, value_name = "STATUS", default_value = "all", value_parser = statuses())]
    pub(crate) status: StatusFilter<EventStatus>,
    /// At most N events (0: all)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) limit: u32,
    /// Only this tenant's events
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

/// `outbox show KEY`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ShowEvent {
    /// The operation's idempotency key (an outbox event is keyed by its operation)
    #[arg(value_name = "KEY")]
    pub(crate) key: String,
    /// The tenant holding the key (needed when several do)
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

/// `outbox resume KEY`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ResumeArgs {
    /// The operation's idempotency key (an outbox event is keyed by its operation)
    #[arg(value_name = "KEY")]
    pub(crate) key: String,
    /// Why, printed with the confirmation and kept in the resume's audit record
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    #[command(flatten)]
    pub(crate) operator: TokenArg,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

const RESUME_HELP: &str = "\
The operator is whom the operator token names (--token, or TOOLGATE_TOKEN): a token the
tenant's issuer signed with a key the store holds, issued with `toolgate operators issue`
holding the permission outbox:resume. The operator resumes only an event of the token's tenant;
an expired token, or one no key of its tenant in the store verifies, is refused before anything
is resumed.

Only a dead event is resumed: it becomes pending, due now, and its delivery budget is counted
again from its current attempt; the next worker pass delivers it with the operation's key. Any
other status is refused, and the refusal says which it is. The resume, or its refusal, appends
an audit record of kind `operator` (the token's subject, the key, `resumed` or `refused`, the
--reason).

Exit codes: 0 resumed, 1 refused (the reason is printed), 2 usage error (no token), 3 store
error.";

/// Every [`EventStatus`] by its stored name, or `all`.
fn statuses() -> impl clap::builder::TypedValueParser<Value = StatusFilter<EventStatus>> {
    status_or_all(EventStatus::ALL, EventStatus::as_str, EventStatus::parse)
}

#[cfg(test)]
mod tests {
    use super::super::Command;
    use super::super::tests::parse;
    use super::*;

    #[test]
    fn outbox_commands_parse() {
        let list = parse(&["outbox", "list", "--status", "dead", "--limit", "5"]).unwrap();
        assert_eq!(
            list.command,
            Command::Outbox(Outbox::List(ListEvents {
                status: StatusFilter::Only(EventStatus::Dead),
                limit: 5,
                tenant: None,
                json: false,
            }))
        );
        let all = parse(&["outbox", "list"]).unwrap();
        assert!(matches!(
            all.command,
            Command::Outbox(Outbox::List(ListEvents {
                status: StatusFilter::All,
                limit: 0,
                ..
            }))
        ));
        let resume = parse(&["outbox", "resume", "k1", "--token", "a.b.c"]).unwrap();
        let Command::Outbox(Outbox::Resume(args)) = resume.command else {
            panic!("a resume");
        };
        assert_eq!(args.key, "k1");
        assert_eq!(args.operator.token.as_deref(), Some("a.b.c"));
        assert!(parse(&["outbox", "list", "--status", "lost"]).is_err());
        assert!(parse(&["outbox", "list", "--limit", "-1"]).is_err());
        assert!(parse(&["outbox", "resume"]).is_err());
    }
}
