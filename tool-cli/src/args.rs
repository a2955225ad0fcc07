//! The command line, declared with clap's derive: its commands, their arguments and their help
//! (each type's doc comment is its help). The arguments of each area live in a file of their
//! own: `approvals`, `ops`, `outbox`, `operators`, `audit`.

use std::ffi::OsString;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};

mod approvals;
mod audit;
mod console;
mod operators;
mod ops;
mod outbox;

pub(crate) use approvals::{Approvals, DecideArgs};
pub(crate) use audit::AuditArgs;
pub(crate) use console::ConsoleArgs;
pub(crate) use operators::{InitArgs, IssueArgs, Operators};
pub(crate) use ops::{Ops, SettleArgs};
pub(crate) use outbox::{Outbox, ResumeArgs};

/// Act on a toolgate operation store: decide approvals, resume dead outbox events, settle
/// unknown outcomes, read operations and the audit trail, and issue the operators' tokens
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, after_help = ROOT_AFTER_HELP)]
pub(crate) struct Cli {
    /// The store: sqlite:PATH or postgres://…
    // The value is never shown in the help: a PostgreSQL URL holds a password. Not `String`:
    // text that is not UTF-8 is refused by `open::spec`, which names the flag and the variable.
    #[arg(
        long,
        value_name = "STORE",
        global = true,
        env = crate::open::STORE_ENV,
        hide_env_values = true
    )]
    pub(crate) store: Option<OsString>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// One command, with its arguments.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Command {
    /// List, show, approve or reject the approvals of operations over a tool's threshold
    #[command(subcommand)]
    Approvals(Approvals),
    /// List or show the stored write operations, or settle one whose outcome is unknown
    #[command(subcommand)]
    Ops(Ops),
    /// List or show the outbox events of operations delivered by a worker, or resume a dead one
    #[command(subcommand)]
    Outbox(Outbox),
    /// Make a tenant's issuer of operator tokens, issue tokens, and list the issuer keys a store
    /// accepts
    #[command(subcommand)]
    Operators(Operators),
    /// Show a run's audit trail in order: its calls, the decisions on its approvals, and the
    /// outbox deliveries and operator actions on its operations
    Audit(AuditArgs),
    /// Serve the operators' web console: the approval queue, operations by state, the outbox
    /// and the audit trail, for operators who sign in with a token
    Console(ConsoleArgs),
}

const ROOT_AFTER_HELP: &str = "\
The store:
  --store sqlite:PATH            the application's SQLite file (it must exist)
  --store postgres://USER:PASSWORD@HOST:PORT/DATABASE
  TOOLGATE_STORE                 used when --store is not given
  Opening a store applies its migrations, as the application does at start-up.

Who acts (approvals approve and reject, outbox resume, ops settle): the operator a token proves
  --token TOKEN, or TOOLGATE_TOKEN=TOKEN   an operator token the tenant's issuer signed
                           (TOOLGATE_TOKEN keeps it out of the process list and shell history)
  Once per tenant, whoever issues its tokens makes the issuer (the secret key stays in the file):
    toolgate --store … operators init --issuer acme-ops --tenant acme --secret-file acme-ops.jwk
  Then, for each operator (no store needed; the token is printed alone):
    export TOOLGATE_TOKEN=$(toolgate operators issue --secret-file acme-ops.jwk \\
        --subject manager --permission refund:approve --lifetime 8h)
  The token's subject is recorded as the approver or operator, never a name from the approval,
  the event or the operation. `outbox resume` needs outbox:resume, `ops settle` ops:settle, and
  each acts only in the token's tenant. An expired token, or one that no key the store holds for
  its tenant verifies, is refused before anything is done.

Exit codes:
  0  done
  1  refused: a token (expired, or of a key the store does not hold), a decision (self-approval,
     expired, missing permission, not found, already decided), a resume or a settlement (missing
     permission, the wrong status), a secret file that exists or that others can read; or what
     was asked for was not found
  2  usage error (no token, a name that is not an identifier, a bad lifetime)
  3  the store could not be opened, reached or read";

/// A `--status` that also takes `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusFilter<T> {
    /// `all`: every status.
    All,
    /// Only this status.
    Only(T),
}

impl<T> StatusFilter<T> {
    /// The status asked for; `None` for every status.
    pub(crate) fn only(self) -> Option<T> {
        match self {
            StatusFilter::All => None,
            StatusFilter::Only(status) => Some(status),
        }
    }
}

/// A parser of one of `statuses` (their names as `name` writes them, parsed back by `parse`),
/// or `all` for every status, whose help and errors list them.
fn status_or_all<T>(
    statuses: impl IntoIterator<Item = T>,
    name: fn(T) -> &'static str,
    parse: fn(&str) -> Option<T>,
) -> impl TypedValueParser<Value = StatusFilter<T>>
where
    T: Clone + Send + Sync + 'static,
{
    let names = statuses.into_iter().map(name).chain(["all"]);
    PossibleValuesParser::new(names).try_map(move |text| match text.as_str() {
        "all" => Ok(StatusFilter::All),
        text => parse(text).map(StatusFilter::Only).ok_or("not a status"),
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use toolgate_core::store::{ApprovalStatus, OperationState};

    use super::approvals::{ListApprovals, ShowApproval};
    use super::ops::{ListOps, ShowOperation};
    use super::*;
    use crate::identity::TokenArg;
    use crate::json::Output;

    pub(super) fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("toolgate").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_console_listens_on_loopback_unless_told_otherwise() {
        let console = parse(&["console"]).unwrap();
        let Command::Console(args) = console.command else {
            panic!("{console:?}");
        };
        assert!(args.listen.ip().is_loopback(), "{}", args.listen);
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
        let all = parse(&["console", "--listen", "0.0.0.0:9000"]).unwrap();
        let Command::Console(args) = all.command else {
            panic!("{all:?}");
        };
        assert_eq!(args.listen.to_string(), "0.0.0.0:9000");
        let local = parse(&["console", "--listen", "localhost:9001"]).unwrap();
        let Command::Console(args) = local.command else {
            panic!("{local:?}");
        };
        assert_eq!(args.listen.to_string(), "127.0.0.1:9001");
        for bad in ["localhost", "localhost:http", "example.com:80", "8080"] {
            let err = parse(&["console", "--listen", bad]).unwrap_err();
            assert!(err.to_string().contains("--listen"), "{err}");
            assert!(err.to_string().contains("localhost:8080"), "{bad}: {err}");
        }
    }

    #[test]
    fn commands_parse() {
        let list = parse(&["approvals", "list", "--store", "sqlite:a.db"]).unwrap();
        assert_eq!(list.store.as_deref(), Some("sqlite:a.db".as_ref()));
        assert_eq!(
            list.command,
            Command::Approvals(Approvals::List(ListApprovals {
                status: StatusFilter::Only(ApprovalStatus::Pending),
                tenant: None,
                output: Output::default(),
            }))
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
            Some("sqlite:a.db".as_ref()),
            "--store before the command"
        );
        assert_eq!(
            all.command,
            Command::Approvals(Approvals::List(ListApprovals {
                status: StatusFilter::All,
                tenant: None,
                output: Output {
                    json: true,
                    hashes: false
                },
            }))
        );
        let shown = parse(&["approvals", "show", "apr_1", "--tenant", "acme"]).unwrap();
        assert_eq!(
            shown.command,
            Command::Approvals(Approvals::Show(ShowApproval {
                id: "apr_1".into(),
                tenant: Some("acme".into()),
                output: Output::default(),
            }))
        );
        let approve = parse(&[
            "approvals",
            "approve",
            "apr_1",
            "--reason",
            "checked",
            "--token",
            "h.c.s",
        ])
        .unwrap();
        assert_eq!(
            approve.command,
            Command::Approvals(Approvals::Approve(DecideArgs {
                id: "apr_1".into(),
                reason: "checked".into(),
                operator: TokenArg {
                    token: Some("h.c.s".into()),
                },
            }))
        );
        // Without a token it parses: the command says what is missing, before the store.
        let reject = parse(&["approvals", "reject", "apr_1", "--reason", "no"]).unwrap();
        assert!(matches!(
            reject.command,
            Command::Approvals(Approvals::Reject(DecideArgs { .. }))
        ));
        // No typed identity.
        for typed in [
            &["--as", "manager"][..],
            &["--identity", "a.json"],
            &["--permission", "p"],
        ] {
            let args = [
                &["approvals", "approve", "apr_1", "--reason", "ok"][..],
                typed,
            ]
            .concat();
            let err = parse(&args).expect_err("no typed identity");
            assert_eq!(err.exit_code(), 2, "{typed:?}");
        }
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
            Command::Ops(Ops::List(ListOps {
                status: Some(StatusFilter::Only(OperationState::AwaitingApproval)),
                run: Some("r1".into()),
                tenant: None,
                output: Output::default(),
            }))
        );
        let shown = parse(&["ops", "show", "tg_1", "--show-hashes"]).unwrap();
        assert_eq!(
            shown.command,
            Command::Ops(Ops::Show(ShowOperation {
                key: "tg_1".into(),
                tenant: None,
                output: Output {
                    json: false,
                    hashes: true
                },
            }))
        );
        let audit = parse(&["audit", "r1", "--tenant", "acme", "--json"]).unwrap();
        assert_eq!(
            audit.command,
            Command::Audit(AuditArgs {
                run: "r1".into(),
                tenant: Some("acme".into()),
                json: true
            })
        );
    }

    #[test]
    fn every_state_is_a_possible_status() {
        for state in OperationState::ALL {
            let listed = parse(&["ops", "list", "--status", state.as_str()]).unwrap();
            let Command::Ops(Ops::List(args)) = listed.command else {
                panic!("ops list: {listed:?}");
            };
            assert_eq!(args.status, Some(StatusFilter::Only(state)));
        }
        let listed = parse(&["ops", "list", "--status", "all"]).unwrap();
        let Command::Ops(Ops::List(args)) = listed.command else {
            panic!("ops list: {listed:?}");
        };
        assert_eq!(args.status, Some(StatusFilter::All));
    }

    #[test]
    fn ops_settle_takes_one_outcome_and_the_evidence() {
        let settled = parse(&["ops", "settle", "k1", "--applied", "--evidence", "re_42"]).unwrap();
        let Command::Ops(Ops::Settle(args)) = settled.command else {
            panic!("ops settle: {settled:?}");
        };
        assert_eq!(
            (args.key.as_str(), args.applied, args.not_applied),
            ("k1", true, false)
        );
        assert_eq!(args.evidence, "re_42");
        for (args, names) in [
            (&["ops", "settle", "k1", "--evidence", "x"][..], "--applied"),
            (
                &[
                    "ops",
                    "settle",
                    "k1",
                    "--applied",
                    "--not-applied",
                    "--evidence",
                    "x",
                ][..],
                "--not-applied",
            ),
            (&["ops", "settle", "k1", "--applied"][..], "--evidence"),
        ] {
            let err = parse(args).expect_err("bad usage");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(err.to_string().contains(names), "{args:?}: {err}");
        }
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
            (&["approvals", "lsit"][..], "list"),
            (&["ops", "list", "--stauts", "failed"][..], "--status"),
        ] {
            let err = parse(args).expect_err("bad usage");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(err.to_string().contains(names), "{args:?}: {err}");
        }
        let help = parse(&["approvals", "approve", "--help"]).expect_err("help is shown");
        assert_eq!(help.exit_code(), 0);
        assert!(help.to_string().contains("TOOLGATE_TOKEN"), "{help}");
    }
}
