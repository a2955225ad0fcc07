//! The `outbox` commands: `list`, `show` and `resume`, with their help.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Command};
use toolgate_core::store::EventStatus;

use super::{Action, Read, json, tenant, text};
use crate::identity::IdentityFlags;

/// `outbox resume KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResumeArgs {
    /// The operation's idempotency key.
    pub(crate) key: String,
    /// `--reason`: printed with the confirmation, and kept in the resume's audit record.
    pub(crate) reason: Option<String>,
    /// `--as`, `--tenant`, `--permission`.
    pub(crate) identity: IdentityFlags,
    /// `--json`.
    pub(crate) json: bool,
}

const RESUME_HELP: &str = "\
The operator: --as USER --tenant TENANT --permission PERMISSION (repeatable), or the JSON file
named by TOOLGATE_IDENTITY: {\"tenant\": \"acme\", \"user\": \"ops\", \"permissions\":
[\"outbox:resume\"]}. Exactly one of the two. The operator must hold the permission
outbox:resume, and resumes only an event of their own tenant.

Only a dead event is resumed: it becomes pending, due now, and its delivery budget is counted
again from its current attempt; the next worker pass delivers it with the operation's key. Any
other status is refused, and the refusal says which it is. The resume, or its refusal, appends
an audit record of kind `operator` (the operator, the key, `resumed` or `refused`, the --reason).

Exit codes: 0 resumed, 1 refused (the reason is printed), 2 usage error, 3 store error.";

/// The `outbox` command.
pub(crate) fn command() -> Command {
    let statuses: Vec<&'static str> = EventStatus::ALL
        .iter()
        .map(|s| s.as_str())
        .chain(["all"])
        .collect();
    let key = || {
        Arg::new("key")
            .value_name("KEY")
            .required(true)
            .help("The operation's idempotency key (an outbox event is keyed by its operation)")
    };
    Command::new("outbox")
        .about("List or show the outbox events of operations delivered by a worker, or resume a dead one")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("list")
                .about("List outbox events, oldest first (default: every status, every tenant)")
                .arg(
                    Arg::new("status")
                        .long("status")
                        .value_name("STATUS")
                        .value_parser(PossibleValuesParser::new(statuses))
                        .default_value("all")
                        .help("Only events in this status (`all`: every status)"),
                )
                .arg(
                    Arg::new("limit")
                        .long("limit")
                        .value_name("N")
                        .value_parser(clap::value_parser!(u32))
                        .default_value("0")
                        .help("At most N events (0: all)"),
                )
                .arg(tenant("Only this tenant's events"))
                .arg(json()),
        )
        .subcommand(
            Command::new("show")
                .about("Show one outbox event: its status, attempts, last error and the provider's answer")
                .arg(key())
                .arg(tenant("The tenant holding the key (needed when several do)"))
                .arg(json()),
        )
        .subcommand(
            Command::new("resume")
                .about("Resume a dead outbox event: pending again, delivered at the next worker pass (needs outbox:resume)")
                .after_help(RESUME_HELP)
                .arg(key())
                .arg(
                    Arg::new("reason")
                        .long("reason")
                        .value_name("TEXT")
                        .help("Why, printed with the confirmation (not stored)"),
                )
                .arg(
                    Arg::new("as")
                        .long("as")
                        .value_name("USER")
                        .help("The operator's user (local use; or TOOLGATE_IDENTITY)"),
                )
                .arg(tenant(
                    "The operator's tenant, the event's (local use; or TOOLGATE_IDENTITY)",
                ))
                .arg(
                    Arg::new("permission")
                        .long("permission")
                        .value_name("PERMISSION")
                        .action(ArgAction::Append)
                        .help("A permission the operator holds, repeatable: outbox:resume is needed (local use; or TOOLGATE_IDENTITY)"),
                )
                .arg(json()),
        )
}

/// The `outbox` invocation `matches` describes.
pub(crate) fn action(matches: &ArgMatches) -> Option<Action> {
    let (verb, m) = matches.subcommand()?;
    Some(match verb {
        "list" => Action::Read(Read::OutboxList {
            status: text(m, "status").and_then(|s| EventStatus::parse(&s)),
            tenant: text(m, "tenant"),
            limit: m.get_one::<u32>("limit").copied().unwrap_or(0),
            json: m.get_flag("json"),
        }),
        "show" => Action::Read(Read::OutboxShow {
            key: text(m, "key")?,
            tenant: text(m, "tenant"),
            json: m.get_flag("json"),
        }),
        "resume" => Action::Resume(ResumeArgs {
            key: text(m, "key")?,
            reason: text(m, "reason"),
            identity: IdentityFlags {
                user: text(m, "as"),
                tenant: text(m, "tenant"),
                permissions: m
                    .get_many::<String>("permission")
                    .map(|p| p.cloned().collect())
                    .unwrap_or_default(),
            },
            json: m.get_flag("json"),
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Invocation, command, invocation};
    use super::*;

    fn parse(args: &[&str]) -> Result<Invocation, clap::Error> {
        let matches = command()
            .try_get_matches_from(std::iter::once("toolgate").chain(args.iter().copied()))?;
        Ok(invocation(&matches).unwrap())
    }

    #[test]
    fn outbox_commands_parse() {
        let list = parse(&["outbox", "list", "--status", "dead", "--limit", "5"]).unwrap();
        assert_eq!(
            list.command,
            Action::Read(Read::OutboxList {
                status: Some(EventStatus::Dead),
                tenant: None,
                limit: 5,
                json: false,
            })
        );
        let all = parse(&["outbox", "list"]).unwrap();
        assert!(matches!(
            all.command,
            Action::Read(Read::OutboxList {
                status: None,
                limit: 0,
                ..
            })
        ));
        let resume = parse(&[
            "outbox",
            "resume",
            "k1",
            "--as",
            "ops",
            "--tenant",
            "acme",
            "--permission",
            "outbox:resume",
        ])
        .unwrap();
        let Action::Resume(args) = resume.command else {
            panic!("a resume");
        };
        assert_eq!(args.key, "k1");
        assert_eq!(args.identity.permissions, ["outbox:resume"]);
        assert!(parse(&["outbox", "list", "--status", "lost"]).is_err());
        assert!(parse(&["outbox", "resume"]).is_err());
    }
}
