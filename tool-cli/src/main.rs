//! `toolgate`: the operator's command line of toolgate.
//!
//! It works on the application's operation store (a SQLite file or a PostgreSQL database)
//! without the application's code: it lists and shows approvals and decides on them, lists and
//! shows operations, lists and shows outbox events and resumes dead ones, and prints a run's
//! audit trail. Run `toolgate --help` for its commands.

mod approvals;
mod args;
mod audit;
mod error;
mod identity;
mod json;
mod open;
mod ops;
mod outbox;
mod table;
mod time;

use std::process::ExitCode;

use toolgate_core::store::OperationStore;

use crate::args::{Action, Invocation, Read};
use crate::error::Failure;

fn main() -> ExitCode {
    let matches = match args::command().try_get_matches() {
        Ok(matches) => matches,
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    let outcome = match args::invocation(&matches) {
        Some(invocation) => execute(invocation),
        None => Err(Failure::usage(
            "incomplete command",
            "a command and its subcommand are needed",
            "run `toolgate --help`",
        )),
    };
    match outcome {
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

/// Runs `invocation` on a single-threaded runtime, answering what to print.
fn execute(invocation: Invocation) -> Result<String, Failure> {
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
    runtime.block_on(run(invocation))
}

async fn run(invocation: Invocation) -> Result<String, Failure> {
    let spec = open::spec(
        invocation.store.as_deref(),
        env(open::STORE_ENV)?.as_deref(),
    )?;
    match invocation.command {
        Action::Decide(args) => {
            // What can be refused without the store is checked before opening it.
            if args.reason.trim().is_empty() {
                return Err(Failure::usage(
                    "the reason is empty",
                    "a decision is stored with why it was made",
                    "give --reason TEXT with the decision's reason",
                ));
            }
            let approver =
                identity::resolve(&args.identity, env(identity::IDENTITY_ENV)?.as_deref())?;
            let opened = open::open(&spec).await?;
            let output = approvals::decide(opened.store(), &args, &approver).await;
            opened.close().await;
            output
        }
        Action::Resume(args) => {
            let operator = identity::resolve_as(
                identity::Role::Operator,
                &args.identity,
                env(identity::IDENTITY_ENV)?.as_deref(),
            )?;
            let opened = open::open(&spec).await?;
            let output = outbox::resume(opened.store(), &args, &operator).await;
            opened.close().await;
            output
        }
        Action::Read(read) => {
            let opened = open::open(&spec).await?;
            let output = answer(opened.store(), read).await;
            opened.close().await;
            output
        }
    }
}

/// The environment variable `name`, if set.
fn env(name: &str) -> Result<Option<String>, Failure> {
    match std::env::var(name) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Failure::usage(
            format!("{name} is not text"),
            "its value is not valid UTF-8",
            format!("set {name} to a UTF-8 value, or unset it"),
        )),
    }
}

async fn answer(store: &dyn OperationStore, read: Read) -> Result<String, Failure> {
    match read {
        Read::ApprovalsList {
            status,
            tenant,
            output,
        } => approvals::list(store, status, tenant.as_deref(), output).await,
        Read::ApprovalsShow { id, tenant, output } => {
            approvals::show(store, &id, tenant.as_deref(), output).await
        }
        Read::OpsList {
            state,
            run,
            tenant,
            output,
        } => ops::list(store, state, run.as_deref(), tenant.as_deref(), output).await,
        Read::OpsShow {
            key,
            tenant,
            output,
        } => ops::show(store, &key, tenant.as_deref(), output).await,
        Read::OutboxList {
            status,
            tenant,
            limit,
            json,
        } => outbox::list(store, status, tenant.as_deref(), limit, json).await,
        Read::OutboxShow { key, tenant, json } => {
            outbox::show(store, &key, tenant.as_deref(), json).await
        }
        Read::Audit { run, tenant, json } => {
            audit::trail(store, &run, tenant.as_deref(), json).await
        }
    }
}
