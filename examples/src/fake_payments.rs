//! The fake payment provider of the refund desk as a process of its own: refunds under an
//! `Idempotency-Key` header, lookups by key, `GET /ledger`, and faults armed over HTTP (the routes
//! are listed in the docs of [`payments`](crate::payments)).
//!
//! ```sh
//! cargo run --example fake_payments -- --port 7070
//! cargo run --example refund_desk -- --provider-url http://127.0.0.1:7070
//! curl http://127.0.0.1:7070/ledger
//! ```
//!
//! `--port 0` (the default) takes a free port. The first line on stdout is
//! `listening on http://127.0.0.1:PORT`, printed once connections are accepted; then one line
//! `applied re_000001 ORD-1001 500.00` for each refund the provider applies. `--ledger PATH` keeps
//! the ledger in that file (JSON Lines, one refund a line), continued if it exists; by default it
//! is a fresh file that goes away with the process. The file is read once, at start, and then
//! only appended to: a second provider on the same ledger refuses to start while this one runs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::payments::server::PaymentsServer;
use crate::shop::{self, money};

/// Runs the provider with the process's arguments (`--port`, `--ledger`), as the `fake_payments`
/// example and binary do; answers the exit status.
pub fn main() -> ExitCode {
    let mut port: u16 = 0;
    let mut ledger: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--port" | "--ledger" => match args.next() {
                Some(value) => value,
                None => return usage(&format!("{arg} needs a value")),
            },
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument `{other}`")),
        };
        match arg.as_str() {
            "--port" => match value.parse() {
                Ok(value) => port = value,
                Err(_) => return usage(&format!("`{value}` is not a port number")),
            },
            _ => ledger = Some(PathBuf::from(value)),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    match runtime.block_on(serve(port, ledger)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fake_payments: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(port: u16, ledger: Option<PathBuf>) -> Result<(), String> {
    // Kept until the process ends: the default ledger lives in it.
    let scratch = tempfile::tempdir().map_err(|err| format!("no temporary directory: {err}"))?;
    let ledger = ledger.unwrap_or_else(|| scratch.path().join("ledger.jsonl"));
    let announce = Box::new(|receipt: &shop::Receipt| {
        println!(
            "applied {} {} {}",
            receipt.refund_id,
            receipt.order_id,
            money(receipt.amount_cents)
        );
    });
    let server = PaymentsServer::open(&ledger, Some(announce))
        .map_err(|err| format!("cannot open the ledger {}: {err}", ledger.display()))?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|err| format!("cannot listen on 127.0.0.1:{port}: {err}"))?;
    let addr = listener
        .local_addr()
        .map_err(|err| format!("no local address: {err}"))?;
    println!("listening on http://{addr}");
    std::sync::Arc::new(server).serve(listener).await;
    Ok(())
}

const USAGE: &str = "usage: fake_payments [--port PORT] [--ledger PATH]";

fn usage(problem: &str) -> ExitCode {
    eprintln!("fake_payments: {problem}\n{USAGE}");
    ExitCode::from(2)
}
