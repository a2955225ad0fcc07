//! `toolgate`: the operators' command line and web console of toolgate.
//!
//! It works on the application's operation store (a SQLite file or a PostgreSQL database)
//! without the application's code: it lists and shows approvals and decides on them, lists and
//! shows operations and settles unknown outcomes, lists and shows outbox events and resumes dead
//! ones, and prints a run's audit trail. Whoever decides or acts signs in with an operator token
//! that the tenant's issuer signed: `operators init` makes an issuer (its public key in the
//! store), `operators issue` issues tokens. `console` serves the same work as web pages, to
//! operators who sign in with their token. Run `toolgate --help` for its commands.
//!
//! This library is the command line as a function: [`main`] is all the `toolgate` binary runs,
//! for a program that ships the same commands under a name of its own (an application's admin
//! tool, or a test package that runs them as a process of its own binary). It has no other API.

mod approvals;
mod args;
mod audit;
mod console;
mod error;
mod identity;
mod json;
mod open;
mod operator_audit;
mod operators;
mod ops;
mod outbox;
mod settle;
mod sign_in;
mod table;
mod time;

use std::ffi::{OsStr, OsString};
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use toolgate_core::store::{OperationStore, Verdict};

use crate::args::{
    Approvals, Cli, Command, DecideArgs, Operators, Ops, Outbox, ResumeArgs, SettleArgs,
    StatusFilter,
};
use crate::error::Failure;
use crate::identity::Role;
use crate::sign_in::{Target, sign_in_to_act};

/// Runs the command line on the process's arguments and environment, printing what the command
/// prints, and answers the exit code: 0 done, 1 refused (a token, a decision, an action) or
/// nothing found, 2 bad usage, 3 the store failed.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if error.kind() == ErrorKind::MissingSubcommand => {
            // A command group without its subcommand (`toolgate`, `toolgate approvals`) shows
            // its help on stderr with 2, also when TOOLGATE_STORE is set, which clap counts as
            // an argument given.
            let asked = std::env::args_os().chain([OsString::from("--help")]);
            let help = Cli::try_parse_from(asked).err().unwrap_or(error);
            eprint!("{}", help.render());
            return ExitCode::from(2);
        }
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    match execute(cli) {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("{failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Runs `cli` on a single-threaded runtime, answering what to print.
fn execute(cli: Cli) -> Result<String, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Failure::usage(
                "could not start",
                format!("the async runtime did not start: {e}"),
                "run the command again",
            )
        })?;
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> Result<String, Failure> {
    // The store is named only where one is opened: `operators issue` needs none.
    let spec = cli.store.as_deref();
    match cli.command {
        Command::Approvals(Approvals::List(a)) => {
            with_store(spec, async |store| {
                approvals::list(store, a.status.only(), a.tenant.as_deref(), a.output).await
            })
            .await
        }
        Command::Approvals(Approvals::Show(a)) => {
            with_store(spec, async |store| {
                approvals::show(store, &a.id, a.tenant.as_deref(), a.output).await
            })
            .await
        }
        Command::Approvals(Approvals::Approve(a)) => decide(spec, Verdict::Approve, &a).await,
        Command::Approvals(Approvals::Reject(a)) => decide(spec, Verdict::Reject, &a).await,
        Command::Ops(Ops::List(a)) => {
            with_store(spec, async |store| {
                let (run, tenant) = (a.run.as_deref(), a.tenant.as_deref());
                let status = a.status.and_then(StatusFilter::only);
                ops::list(store, status, run, tenant, a.output).await
            })
            .await
        }
        Command::Ops(Ops::Show(a)) => {
            with_store(spec, async |store| {
                ops::show(store, &a.key, a.tenant.as_deref(), a.output).await
            })
            .await
        }
        Command::Ops(Ops::Settle(a)) => settle(spec, &a).await,
        Command::Outbox(Outbox::List(a)) => {
            with_store(spec, async |store| {
                let status = a.status.only();
                outbox::list(store, status, a.tenant.as_deref(), a.limit, a.json).await
            })
            .await
        }
        Command::Outbox(Outbox::Show(a)) => {
            with_store(spec, async |store| {
                outbox::show(store, &a.key, a.tenant.as_deref(), a.json).await
            })
            .await
        }
        Command::Outbox(Outbox::Resume(a)) => resume(spec, &a).await,
        Command::Operators(Operators::Init(a)) => {
            let secret = operators::prepare(&a)?;
            with_store(spec, async |store| {
                operators::init(store, &a, &secret).await
            })
            .await
        }
        Command::Operators(Operators::Issue(a)) => operators::issue(&a),
        Command::Operators(Operators::List(a)) => {
            with_store(spec, async |store| {
                operators::list(store, &a.tenant, a.json).await
            })
            .await
        }
        Command::Console(a) => console::run(&open::spec(spec)?, a.listen).await,
        Command::Audit(a) => {
            with_store(spec, async |store| {
                audit::trail(store, &a.run, a.tenant.as_deref(), a.json).await
            })
            .await
        }
    }
}

/// `approvals approve` or `approvals reject`: what can be refused without the store (an empty
/// reason, no token) is refused before opening it; the approver is signed in before anything
/// is decided.
async fn decide(
    spec: Option<&OsStr>,
    verdict: Verdict,
    args: &DecideArgs,
) -> Result<String, Failure> {
    if args.reason.trim().is_empty() {
        return Err(Failure::usage(
            "the reason is empty",
            "a decision is stored with why it was made",
            "give --reason TEXT with the decision's reason",
        ));
    }
    let token = identity::token(Role::Approver, &args.operator)?;
    with_store(spec, async |store| {
        let command = format!("approvals {}", verdict.as_str());
        let approver = sign_in_to_act(store, token, &command, Target::Approval(&args.id)).await?;
        approvals::decide(store, verdict, &args.id, &args.reason, &approver).await
    })
    .await
}

/// `outbox resume`: without a token, the store is not opened; the operator is signed in before
/// anything is resumed.
async fn resume(spec: Option<&OsStr>, args: &ResumeArgs) -> Result<String, Failure> {
    let token = identity::token(Role::Operator, &args.operator)?;
    with_store(spec, async |store| {
        let target = Target::Operation(&args.key);
        let operator = sign_in_to_act(store, token, "outbox resume", target).await?;
        let resume = outbox::Resume {
            key: &args.key,
            reason: args.reason.as_deref(),
            json: args.json,
        };
        outbox::resume(store, &resume, &operator).await
    })
    .await
}

/// `ops settle`: what can be refused without the store (empty evidence, no token) is refused
/// before opening it; the operator is signed in before anything is settled.
async fn settle(spec: Option<&OsStr>, args: &SettleArgs) -> Result<String, Failure> {
    if args.evidence.trim().is_empty() {
        return Err(Failure::usage(
            "the evidence is empty",
            "a settlement is kept with what shows the operation's outcome",
            "give --evidence TEXT: the provider's reference, or what you saw in its ledger",
        ));
    }
    let token = identity::token(Role::Settler, &args.operator)?;
    with_store(spec, async |store| {
        let target = Target::Operation(&args.key);
        let operator = sign_in_to_act(store, token, "ops settle", target).await?;
        let settlement = settle::Settlement {
            key: &args.key,
            applied: args.applied,
            evidence: &args.evidence,
            json: args.json,
        };
        settle::settle(store, &settlement, &operator).await
    })
    .await
}

/// Opens the store `given` names (`--store`, else `TOOLGATE_STORE`), does `work` on it, and
/// closes it.
async fn with_store(
    given: Option<&OsStr>,
    work: impl AsyncFnOnce(&dyn OperationStore) -> Result<String, Failure>,
) -> Result<String, Failure> {
    let spec = open::spec(given)?;
    let opened = open::open(&spec).await?;
    let output = work(opened.store()).await;
    opened.close().await;
    output
}
