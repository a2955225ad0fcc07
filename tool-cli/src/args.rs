//! The command line: its commands, their help, and what a parsed invocation asks for.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Command};
use toolgate_core::store::{ApprovalStatus, OperationState, Verdict};

use crate::identity::IdentityFlags;
use crate::json::Output;

mod outbox;

pub(crate) use outbox::ResumeArgs;

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    /// `--store`, when given (else `TOOLGATE_STORE`).
    pub(crate) store: Option<String>,
    /// The command.
    pub(crate) command: Action,
}

/// One command, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// A command that only reads the store.
    Read(Read),
    /// `approvals approve ID` or `approvals reject ID`.
    Decide(DecideArgs),
    /// `outbox resume KEY`.
    Resume(ResumeArgs),
}

/// A command that only reads the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Read {
    /// `approvals list`.
    ApprovalsList {
        /// `--status`; `None` for `all`.
        status: Option<ApprovalStatus>,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--json`, `--show-hashes`.
        output: Output,
    },
    /// `approvals show ID`.
    ApprovalsShow {
        /// The approval's id.
        id: String,
        /// `--tenant`: shown only when it is this tenant's.
        tenant: Option<String>,
        /// `--json`, `--show-hashes`.
        output: Output,
    },
    /// `ops list`.
    OpsList {
        /// `--status`.
        state: Option<OperationState>,
        /// `--run`.
        run: Option<String>,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--json`, `--show-hashes`.
        output: Output,
    },
    /// `ops show KEY`.
    OpsShow {
        /// The idempotency key.
        key: String,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--json`, `--show-hashes`.
        output: Output,
    },
    /// `outbox list`.
    OutboxList {
        /// `--status`; `None` for every status.
        status: Option<toolgate_core::store::EventStatus>,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--limit`; 0 for all.
        limit: u32,
        /// `--json`.
        json: bool,
    },
    /// `outbox show KEY`.
    OutboxShow {
        /// The operation's idempotency key.
        key: String,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--json`.
        json: bool,
    },
    /// `audit RUN`.
    Audit {
        /// The run id.
        run: String,
        /// `--tenant`.
        tenant: Option<String>,
        /// `--json`.
        json: bool,
    },
}

/// `approvals approve ID` or `approvals reject ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecideArgs {
    /// The approval's id.
    pub(crate) id: String,
    /// Approve or reject.
    pub(crate) verdict: Verdict,
    /// `--reason`.
    pub(crate) reason: String,
    /// `--as`, `--tenant`, `--permission`.
    pub(crate) identity: IdentityFlags,
}

const ROOT_AFTER_HELP: &str = "\
The store:
  --store sqlite:PATH            the application's SQLite file (it must exist)
  --store postgres://USER:PASSWORD@HOST:PORT/DATABASE
  TOOLGATE_STORE                 used when --store is not given
  Opening a store applies its migrations, as the application does at start-up.

The approver (approvals approve and reject) or operator (outbox resume), one source of the two:
  --as USER --tenant TENANT --permission PERMISSION (repeatable)   for local use
  TOOLGATE_IDENTITY=FILE   a JSON file {\"tenant\": \"acme\", \"user\": \"manager\",
                           \"permissions\": [\"refund:approve\"]}, for real use
  Giving both is an error. The approver never comes from the approval itself.
  `outbox resume` needs the permission outbox:resume, and resumes only an event of the
  operator's tenant.

Exit codes:
  0  done
  1  a decision or a resume was refused (self-approval, expired, missing permission, not found,
     already decided, an event that is not dead), or what was asked for was not found
  2  usage error
  3  the store could not be opened, reached or read";

const IDENTITY_HELP: &str = "\
The approver: --as USER --tenant TENANT --permission PERMISSION (repeatable), or the JSON file
named by TOOLGATE_IDENTITY: {\"tenant\": \"acme\", \"user\": \"manager\", \"permissions\":
[\"refund:approve\"]}. Exactly one of the two. The approver must belong to the approval's tenant,
hold its approval permission (shown by `approvals show`), and not be its requester.

Exit codes: 0 decided, 1 refused (the reason is printed), 2 usage error, 3 store error.";

/// The whole command line, with its help.
pub(crate) fn command() -> Command {
    let store = Arg::new("store")
        .long("store")
        .value_name("STORE")
        .global(true)
        .help("The store: sqlite:PATH or postgres://… (default: the environment's TOOLGATE_STORE)");
    Command::new("toolgate")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Act on a toolgate operation store: decide approvals, resume dead outbox events, read operations and the audit trail")
        .after_help(ROOT_AFTER_HELP)
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(store)
        .subcommand(approvals())
        .subcommand(ops())
        .subcommand(outbox::command())
        .subcommand(audit())
}

pub(super) fn json() -> Arg {
    Arg::new("json")
        .long("json")
        .action(ArgAction::SetTrue)
        .help("Print one JSON document instead of a table")
}

fn show_hashes() -> Arg {
    Arg::new("show-hashes")
        .long("show-hashes")
        .action(ArgAction::SetTrue)
        .help("Also print the stored request hash (and an approval's policy hash), left out otherwise")
}

/// `--json` and `--show-hashes` as `matches` give them.
fn output(matches: &ArgMatches) -> Output {
    Output {
        json: matches.get_flag("json"),
        hashes: matches.get_flag("show-hashes"),
    }
}

pub(super) fn tenant(help: &'static str) -> Arg {
    Arg::new("tenant")
        .long("tenant")
        .value_name("TENANT")
        .help(help)
}

fn approvals() -> Command {
    let status = Arg::new("status")
        .long("status")
        .value_name("STATUS")
        .value_parser(PossibleValuesParser::new([
            "pending", "approved", "rejected", "all",
        ]))
        .default_value("pending")
        .help("Only approvals in this status (`all`: every status)");
    let id = || {
        Arg::new("id")
            .value_name("ID")
            .required(true)
            .help("The approval's id (apr_…)")
    };
    Command::new("approvals")
        .about("List, show, approve or reject the approvals of operations over a tool's threshold")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("list")
                .about("List approvals, oldest first (default: the pending ones of every tenant)")
                .arg(status)
                .arg(tenant("Only this tenant's approvals"))
                .arg(json())
                .arg(show_hashes()),
        )
        .subcommand(
            Command::new("show")
                .about("Show everything about one approval: the call, its requester, its decisions")
                .arg(id())
                .arg(tenant("Show it only if it is this tenant's"))
                .arg(json())
                .arg(show_hashes()),
        )
        .subcommand(decide("approve", "Approve an operation: it runs at the next call of the model with the same arguments, or by the application's runner", id()))
        .subcommand(decide("reject", "Reject an operation: it never runs; the model's next identical call is told so", id()))
}

fn decide(name: &'static str, about: &'static str, id: Arg) -> Command {
    Command::new(name)
        .about(about)
        .after_help(IDENTITY_HELP)
        .arg(id)
        .arg(
            Arg::new("reason")
                .long("reason")
                .value_name("TEXT")
                .required(true)
                .help("Why, stored with the decision and in the audit trail"),
        )
        .arg(
            Arg::new("as")
                .long("as")
                .value_name("USER")
                .help("The approver's user (local use; or TOOLGATE_IDENTITY)"),
        )
        .arg(tenant(
            "The approver's tenant (local use; or TOOLGATE_IDENTITY)",
        ))
        .arg(
            Arg::new("permission")
                .long("permission")
                .value_name("PERMISSION")
                .action(ArgAction::Append)
                .help(
                    "A permission the approver holds, repeatable (local use; or TOOLGATE_IDENTITY)",
                ),
        )
}

fn ops() -> Command {
    let states: Vec<&'static str> = OperationState::ALL.iter().map(|s| s.as_str()).collect();
    Command::new("ops")
        .about("List or show the stored write operations")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("list")
                .about("List operations, oldest first")
                .arg(
                    Arg::new("status")
                        .long("status")
                        .value_name("STATE")
                        .value_parser(PossibleValuesParser::new(states))
                        .help("Only operations in this state"),
                )
                .arg(
                    Arg::new("run")
                        .long("run")
                        .value_name("RUN")
                        .help("Only operations a call of this run touched (by the audit trail)"),
                )
                .arg(tenant("Only this tenant's operations"))
                .arg(json())
                .arg(show_hashes()),
        )
        .subcommand(
            Command::new("show")
                .about("Show one operation: its state, attempts, errors and result")
                .arg(
                    Arg::new("key")
                        .value_name("KEY")
                        .required(true)
                        .help("The operation's idempotency key"),
                )
                .arg(tenant(
                    "The tenant holding the key (needed when several do)",
                ))
                .arg(json())
                .arg(show_hashes()),
        )
}

fn audit() -> Command {
    Command::new("audit")
        .about("Show a run's audit trail in order: its calls, the decisions on its approvals, and the outbox deliveries and operator actions on its operations")
        .arg(
            Arg::new("run")
                .value_name("RUN")
                .required(true)
                .help("The run id"),
        )
        .arg(tenant(
            "The tenant of the run (needed when several tenants have a run of this id)",
        ))
        .arg(json())
}

/// The invocation `matches` describes (matched by [`command`], which requires a subcommand at
/// every level, so `None` does not happen).
pub(crate) fn invocation(matches: &ArgMatches) -> Option<Invocation> {
    let (group, sub) = matches.subcommand()?;
    let command = match group {
        "approvals" => approvals_action(sub)?,
        "ops" => ops_action(sub)?,
        "outbox" => outbox::action(sub)?,
        "audit" => Action::Read(Read::Audit {
            run: text(sub, "run")?,
            tenant: text(sub, "tenant"),
            json: sub.get_flag("json"),
        }),
        _ => return None,
    };
    Some(Invocation {
        store: text(matches, "store"),
        command,
    })
}

pub(super) fn text(matches: &ArgMatches, name: &str) -> Option<String> {
    matches.get_one::<String>(name).cloned()
}

fn approvals_action(matches: &ArgMatches) -> Option<Action> {
    let (verb, m) = matches.subcommand()?;
    Some(match verb {
        "list" => Action::Read(Read::ApprovalsList {
            status: text(m, "status").and_then(|s| ApprovalStatus::parse(&s)),
            tenant: text(m, "tenant"),
            output: output(m),
        }),
        "show" => Action::Read(Read::ApprovalsShow {
            id: text(m, "id")?,
            tenant: text(m, "tenant"),
            output: output(m),
        }),
        "approve" | "reject" => Action::Decide(DecideArgs {
            id: text(m, "id")?,
            verdict: if verb == "approve" {
                Verdict::Approve
            } else {
                Verdict::Reject
            },
            reason: text(m, "reason")?,
            identity: IdentityFlags {
                user: text(m, "as"),
                tenant: text(m, "tenant"),
                permissions: m
                    .get_many::<String>("permission")
                    .map(|p| p.cloned().collect())
                    .unwrap_or_default(),
            },
        }),
        _ => return None,
    })
}

fn ops_action(matches: &ArgMatches) -> Option<Action> {
    let (verb, m) = matches.subcommand()?;
    Some(match verb {
        "list" => Action::Read(Read::OpsList {
            state: text(m, "status").and_then(|s| OperationState::parse(&s)),
            run: text(m, "run"),
            tenant: text(m, "tenant"),
            output: output(m),
        }),
        "show" => Action::Read(Read::OpsShow {
            key: text(m, "key")?,
            tenant: text(m, "tenant"),
            output: output(m),
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Invocation, clap::Error> {
        let matches = command()
            .try_get_matches_from(std::iter::once("toolgate").chain(args.iter().copied()))?;
        Ok(invocation(&matches).expect("a full invocation"))
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn commands_parse_into_actions() {
        let list = parse(&["approvals", "list", "--store", "sqlite:a.db"]).unwrap();
        assert_eq!(list.store.as_deref(), Some("sqlite:a.db"));
        assert_eq!(
            list.command,
            Action::Read(Read::ApprovalsList {
                status: Some(ApprovalStatus::Pending),
                tenant: None,
                output: Output::default(),
            })
        );
        let all = parse(&[
            "--store",
            "sqlite:a.db",
            "approvals",
            "list",
            "--status",
            "all",
            "--json",
        ])
        .unwrap();
        assert_eq!(
            all.store.as_deref(),
            Some("sqlite:a.db"),
            "--store before the command"
        );
        assert_eq!(
            all.command,
            Action::Read(Read::ApprovalsList {
                status: None,
                tenant: None,
                output: Output {
                    json: true,
                    hashes: false
                },
            })
        );
        let approve = parse(&[
            "approvals",
            "approve",
            "apr_1",
            "--reason",
            "checked",
            "--as",
            "manager",
            "--tenant",
            "acme",
            "--permission",
            "refund:approve",
            "--permission",
            "x",
        ])
        .unwrap();
        assert_eq!(
            approve.command,
            Action::Decide(DecideArgs {
                id: "apr_1".into(),
                verdict: Verdict::Approve,
                reason: "checked".into(),
                identity: IdentityFlags {
                    user: Some("manager".into()),
                    tenant: Some("acme".into()),
                    permissions: vec!["refund:approve".into(), "x".into()],
                },
            })
        );
        let reject = parse(&["approvals", "reject", "apr_1", "--reason", "no"]).unwrap();
        assert!(matches!(
            reject.command,
            Action::Decide(DecideArgs {
                verdict: Verdict::Reject,
                ..
            })
        ));
        let ops = parse(&[
            "ops",
            "list",
            "--status",
            "awaiting_approval",
            "--run",
            "r1",
        ])
        .unwrap();
        assert_eq!(
            ops.command,
            Action::Read(Read::OpsList {
                state: Some(OperationState::AwaitingApproval),
                run: Some("r1".into()),
                tenant: None,
                output: Output::default(),
            })
        );
        let shown = parse(&["ops", "show", "tg_1", "--show-hashes"]).unwrap();
        assert_eq!(
            shown.command,
            Action::Read(Read::OpsShow {
                key: "tg_1".into(),
                tenant: None,
                output: Output {
                    json: false,
                    hashes: true
                },
            })
        );
        let audit = parse(&["audit", "r1", "--tenant", "acme", "--json"]).unwrap();
        assert_eq!(
            audit.command,
            Action::Read(Read::Audit {
                run: "r1".into(),
                tenant: Some("acme".into()),
                json: true
            })
        );
    }

    #[test]
    fn bad_usage_is_a_clap_error_that_names_the_fix() {
        for (args, names) in [
            (&["approvals", "approve", "apr_1"][..], "--reason"),
            (&["approvals", "list", "--status", "maybe"][..], "pending"),
            (
                &["ops", "list", "--status", "done"][..],
                "awaiting_approval",
            ),
            (&["approvals", "frobnicate"][..], "frobnicate"),
        ] {
            let err = parse(args).expect_err("bad usage");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(err.to_string().contains(names), "{args:?}: {err}");
        }
        let help = parse(&["approvals", "approve", "--help"]).expect_err("help is shown");
        assert_eq!(help.exit_code(), 0);
        assert!(help.to_string().contains("TOOLGATE_IDENTITY"), "{help}");
    }
}
