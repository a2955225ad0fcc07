//! The refund desk: an agent's tool calls against a payment provider that misbehaves, made safe.
//!
//! ```sh
//! cargo run --example refund_desk
//! ```
//!
//! With no flags the desk tells its seed story (`examples/scenarios/timeout-after-apply.jsonl`)
//! on stdout: a model asks for a refund of 500.00 on ORD-1001, the payment provider applies it and
//! its answer times out, the model asks again, the reconciler settles the refund, and the
//! provider's ledger at the end shows the customer refunded exactly once. It runs on a fresh
//! SQLite file and a fake payment provider started in process on a free loopback port.
//!
//! ```sh
//! cargo run --example refund_desk -- --script examples/scenarios/bad-arguments.jsonl
//! ```
//!
//! `--script FILE` (`-` for stdin) replays any story written as JSON Lines
//! (`examples/scenarios/README.md`): the desk answers the lines that have an answer, one JSON line each
//! on stdout, and ends with the provider's ledger; the narration goes to stderr. The answers carry
//! no clock or random value: the same script gives the same output.
//!
//! Flags:
//! - `--store sqlite:PATH` (default: a fresh file) or `--store postgres://USER:PASSWORD@HOST/DB`;
//! - `--provider-url http://HOST:PORT`: a provider already running (`cargo run --example
//!   fake_payments`) instead of one in process;
//! - `--provider-timeout-ms N` (default 2000): how long the tools wait for the provider;
//! - `--clock-ahead-secs N` (default 0): run the desk's clock ahead, as a desk restarted that long
//!   after a crash would, so that the leases the dead process held have expired;
//! - `--delivery direct|outbox` (default `direct`): how `issue_refund` is delivered, as a
//!   script's `{"delivery": "outbox"}` line sets it. Through the outbox, the refund is recorded in
//!   the store's database (the shop's `refund_requests` table, created at start-up, and the
//!   operation's event) and the model reads `queued`; a `{"deliver": {}}` line runs the outbox
//!   worker, which sends each queued refund to the provider under its operation's key (3
//!   deliveries at most, retried at once, then dead until an operator resumes it with
//!   `toolgate outbox resume KEY`) and answers `{"delivered": n, "retrying": n, "dead": n}`.
//!
//! The request hashes the store keeps are keyed with the secret in `TOOLGATE_HASH_SECRET`, or in
//! the file `TOOLGATE_HASH_SECRET_FILE` names (at least 32 bytes; keep it the same across
//! restarts, or a replay of an earlier call answers `conflict`). Without either, the desk says on
//! stderr that it uses toolgate's public local default, which protects no argument.
//!
//! The script is read as bytes, one line at a time: a line the desk cannot take (not UTF-8, not
//! JSON, a key given twice, a fault beyond its limits) is answered `{"error": "line N: …"}` and
//! the lines after it still play; a byte-order mark at the start is skipped.
//!
//! The exit status is 0 when the desk played the script to its end and printed the ledger,
//! whatever it answered (an `{"error": …}` answer is the desk doing its job: the line is
//! answered, and the count of such lines is narrated on stderr); 2 on bad flags, or when the
//! script cannot be read, the store or the provider cannot be reached, the hash secret cannot be
//! read, or the ledger cannot be read at the end.

mod desk;
pub mod kit_story;
mod narrate;
mod script;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Stdin};
use toolgate::tool::Delivery;

use crate::payments::client::HttpPayments;
use crate::payments::server::PaymentsServer;
use desk::{Desk, Options};
pub use desk::{StoreSpec, create_tables, default_auth, worker};
use narrate::{Narrator, Voice};

/// The story the desk tells when given no script.
const SEED_STORY: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scenarios/timeout-after-apply.jsonl"
));

const USAGE: &str = "usage: refund_desk [--script FILE|-] [--store sqlite:PATH|postgres://…] \
     [--provider-url URL] [--provider-timeout-ms N] [--clock-ahead-secs N] \
     [--delivery direct|outbox]\n\
     The script's lines (examples/scenarios/README.md): session, run, openai, anthropic, fault, \
     reconcile, restart, approve, reject, run_approved, delivery (\"direct\" or \"outbox\": how \
     issue_refund is delivered from then on), deliver ({}: the outbox worker delivers every \
     refund queued, answering {\"delivered\": n, \"retrying\": n, \"dead\": n}), provider_refund \
     ({\"order_id\", \"amount_cents\", \"key\"}: a refund made at the provider outside the agent).";

/// The flags.
#[derive(Debug, Default)]
struct Flags {
    script: Option<String>,
    store: Option<StoreSpec>,
    provider_url: Option<String>,
    provider_timeout: Option<Duration>,
    clock_ahead: Duration,
    delivery: Delivery,
}

/// Runs the refund desk with the process's arguments (the flags the module's docs list), as the
/// `refund_desk` example and binary do; answers the exit status.
pub fn main() -> ExitCode {
    let flags = match parse_flags(std::env::args().skip(1)) {
        Ok(Some(flags)) => flags,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("refund_desk: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    match runtime.block_on(run(flags)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("refund_desk: {problem}");
            ExitCode::from(2)
        }
    }
}

fn parse_flags(mut args: impl Iterator<Item = String>) -> Result<Option<Flags>, String> {
    let mut flags = Flags::default();
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(None);
        }
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => {
                let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
                (arg, value)
            }
        };
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("{name} takes a whole number, not `{value}`"))
        };
        match name.as_str() {
            "--script" => flags.script = Some(value),
            "--store" => flags.store = Some(StoreSpec::parse(&value)?),
            "--provider-url" => flags.provider_url = Some(value),
            "--provider-timeout-ms" => match number(&value)? {
                0 => return Err("--provider-timeout-ms must be above 0".to_owned()),
                ms => flags.provider_timeout = Some(Duration::from_millis(ms)),
            },
            "--clock-ahead-secs" => flags.clock_ahead = Duration::from_secs(number(&value)?),
            "--delivery" => flags.delivery = script::delivery(&value)?,
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    Ok(Some(flags))
}

/// The longest error answer, in characters: a line's error never echoes a huge line back.
const MAX_ERROR: usize = 1000;

/// Plays the script to its end; an error when the desk cannot start, read the script or read the
/// ledger at the end.
async fn run(flags: Flags) -> Result<(), String> {
    let story = flags.script.is_none();
    let narrator = Narrator::new(story);
    let mut script = match flags.script.as_deref() {
        None => Script::whole(SEED_STORY.as_bytes()),
        Some("-") => Script::Stdin(BufReader::new(tokio::io::stdin())),
        Some(path) => Script::whole(
            &std::fs::read(path).map_err(|err| format!("cannot read the script {path}: {err}"))?,
        ),
    };
    // Holds the default store and ledger until the desk is done.
    let scratch = tempfile::tempdir().map_err(|err| format!("no temporary directory: {err}"))?;
    let store = flags
        .store
        .unwrap_or_else(|| StoreSpec::Sqlite(scratch.path().join("operations.db")));
    let url = match flags.provider_url {
        Some(url) => url,
        None => {
            let server = PaymentsServer::open(scratch.path().join("ledger.jsonl"), None)
                .map_err(|err| format!("cannot start the payment provider: {err}"))?;
            let addr = server
                .spawn()
                .await
                .map_err(|err| format!("cannot start the payment provider: {err}"))?;
            format!("http://{addr}")
        }
    };
    let timeout = flags
        .provider_timeout
        .unwrap_or(Duration::from_millis(2000));
    let payments = HttpPayments::new(&url, timeout)?.with_log(Arc::new(move |line: &str| {
        narrator.say(Voice::Provider, &format!("    provider: {line}"));
    }));
    let mut desk = Desk::open(Options {
        store,
        payments,
        clock_ahead: flags.clock_ahead,
        narrator,
        explain: story,
        delivery: flags.delivery,
    })
    .await?;
    if story {
        introduce(&narrator, timeout);
    }
    let mut errors = 0;
    let mut number = 0;
    while let Some(raw) = script.next_line().await? {
        number += 1;
        let Some(line) = script::decode(number, &raw) else {
            continue;
        };
        let played = match line {
            Ok(line) => desk.play(line).await,
            Err(problem) => Err(problem),
        };
        let answer = match played {
            Ok(answer) => answer,
            Err(problem) => {
                errors += 1;
                let problem = format!("line {number}: {}", script::shortened(&problem, MAX_ERROR));
                narrator.say(Voice::Bad, &problem);
                Some(json!({"error": problem}))
            }
        };
        if let (Some(answer), false) = (answer, story) {
            println!("{answer}");
        }
    }
    if errors > 0 {
        narrator.say(
            Voice::Bad,
            &format!("{errors} line(s) of the script were answered with an error"),
        );
    }
    desk.close().await;
    let ledger = desk.payments().ledger().await?;
    if story {
        tell_ledger(&narrator, &ledger);
    } else {
        println!("{ledger}");
    }
    Ok(())
}

/// Where the script's lines come from: bytes read at once, or stdin, read a line at a time as
/// it arrives, so that whoever writes it may wait for one line's answer before the next. A line
/// is its bytes without the `\n` that ends it; what they say is [`script::decode`]'s to tell.
enum Script {
    Whole(std::vec::IntoIter<Vec<u8>>),
    Stdin(BufReader<Stdin>),
}

impl Script {
    fn whole(bytes: &[u8]) -> Script {
        let lines: Vec<Vec<u8>> = bytes
            .split(|&byte| byte == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        Script::Whole(lines.into_iter())
    }

    async fn next_line(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self {
            Script::Whole(lines) => Ok(lines.next()),
            Script::Stdin(stdin) => {
                let mut line = Vec::new();
                let read = stdin
                    .read_until(b'\n', &mut line)
                    .await
                    .map_err(|err| format!("cannot read the script from stdin: {err}"))?;
                if read == 0 {
                    return Ok(None);
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Ok(Some(line))
            }
        }
    }
}

fn introduce(narrator: &Narrator, timeout: Duration) {
    narrator.say(Voice::Title, "toolgate refund desk");
    narrator.say(
        Voice::Aside,
        &format!(
            "A scripted model calls get_order and issue_refund through toolgate's dispatcher, on a \
             SQLite store, against a fake payment provider that applies the first refund and then \
             lets its answer time out ({} ms). Lines marked · explain what toolgate did.",
            timeout.as_millis()
        ),
    );
}

fn tell_ledger(narrator: &Narrator, ledger: &Value) {
    narrator.say(Voice::Title, "── the payment provider's ledger ──");
    if let Some(orders) = ledger["ledger"].as_object() {
        for (order, entry) in orders {
            narrator.say(
                Voice::Title,
                &format!(
                    "  {order}  refunded {:>8}  in {} refund(s)",
                    entry["refunded"].as_str().unwrap_or("?"),
                    entry["refunds"]
                ),
            );
        }
    }
    narrator.say(
        Voice::Aside,
        &format!(
            "  provider requests: {} refund, {} lookup",
            ledger["provider_requests"]["refund"], ledger["provider_requests"]["lookup"]
        ),
    );
    if ledger["ledger"]["ORD-1001"]["refunds"] == 1 {
        narrator.say(
            Voice::Good,
            "ORD-1001 was refunded 500.00 exactly once, though the model asked three times and \
             the first answer never came.",
        );
    }
    narrator.say(Voice::Aside, &format!("{ledger}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Result<Option<Flags>, String> {
        parse_flags(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn flags_take_a_value_after_a_space_or_an_equals_sign() {
        let parsed = flags(&["--script", "a.jsonl", "--provider-timeout-ms=250"])
            .unwrap()
            .unwrap();
        assert_eq!(parsed.script.as_deref(), Some("a.jsonl"));
        assert_eq!(parsed.provider_timeout, Some(Duration::from_millis(250)));
        assert_eq!(parsed.delivery, Delivery::Direct);
        let outbox = flags(&["--delivery", "outbox"]).unwrap().unwrap();
        assert_eq!(outbox.delivery, Delivery::Outbox);
        assert!(flags(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        for (args, needle) in [
            (&["--store", "mysql://x"][..], "not a store"),
            (&["--store", "sqlite:"][..], "needs a path"),
            (&["--provider-timeout-ms", "soon"][..], "whole number"),
            (&["--provider-timeout-ms", "0"][..], "above 0"),
            (&["--script"][..], "needs a value"),
            (&["--verbose", "1"][..], "unknown flag"),
            (&["--delivery", "soon"][..], "not a delivery"),
        ] {
            let err = flags(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
