//! The demo shop as an MCP server: its tools (`get_order`, `issue_refund`,
//! `update_crm_and_notify`) served to any MCP client, every call run through toolgate's
//! dispatcher on the SQLite store, against the fake payment provider of the refund desk.
//!
//! ```sh
//! cargo run --example mcp_server                                   # stdio
//! cargo run --example mcp_server -- --http 127.0.0.1:8080 \
//!     --token s3cret=acme:desk:orders:read,refund:create           # streamable HTTP
//! ```
//!
//! **On stdio** (the default) the server serves the client that started it, as the identity its
//! flags give: `--tenant` (default `acme`), `--user` (default `desk`) and `--permission`, once
//! per permission (default `orders:read`, `refund:create` and `crm:write`: the whole shop). The
//! client is listed the tools its permissions allow; a tool it was not listed is an unknown
//! tool to it. The connection is one MCP session, so one run: a refund asked twice is refunded
//! once, the second answer a replay (in the next process too: keys are per tenant, kept in the
//! database). Stdout is the protocol's channel; what the server says goes to stderr. A desktop client's configuration starts it like this (build it first with
//! `cargo build --release --example mcp_server`):
//!
//! ```json
//! {"mcpServers": {"toolgate-shop": {
//!     "command": "/path/to/toolgate/target/release/examples/mcp_server",
//!     "args": ["--db", "/path/to/toolgate-shop.db"]
//! }}}
//! ```
//!
//! **With `--http HOST:PORT`** it serves streamable HTTP on that address (port 0 takes a free
//! one; every path is the MCP endpoint; only loopback `Host` headers are accepted) and prints
//! `mcp_server: listening on http://ADDRESS` on stderr once it accepts connections. Each request
//! is identified by its `Authorization: Bearer TOKEN` against the table of `--token
//! TOKEN=TENANT:USER:PERMISSION,...` flags (one per client); a request without a token, or with
//! one not in the table, is answered `401 Unauthorized` with `WWW-Authenticate: Bearer`, and no
//! session is made. A browser page may call only from a loopback origin (any other `Origin` is
//! `403`), and a session answers only the token's caller who opened it. Each MCP session is a
//! run of its own, listed the tools its token's permissions allow. Ctrl-C (or SIGTERM) stops
//! the server once the calls in flight have ended.
//!
//! Flags for both:
//! - `--db PATH`: the SQLite file of the operations (default `toolgate-mcp-shop.db` in the
//!   system's temporary directory); kept across restarts, so a refund asked again after one is
//!   still a replay;
//! - `--provider-url http://HOST:PORT`: a payment provider already running (`cargo run
//!   --example fake_payments`); by default the server starts the fake provider in process, its
//!   ledger in `PATH.ledger.jsonl` beside the database, and says on stderr what it applies;
//! - `--provider-timeout-ms N` (default 2000): how long the tools wait for the provider;
//! - `--no-additional-properties`: serve the tools' schemas without `additionalProperties`, for
//!   clients that cannot read it (google-genai's MCP bridge fails on `additionalProperties:
//!   false`); an argument a tool does not take is still refused as `invalid_arguments`.
//!   `scripts/gemini_mcp_bridge.py` checks the bridge against the server.
//!
//! The request hashes the store keeps are keyed with the secret in `TOOLGATE_HASH_SECRET`, or in
//! the file `TOOLGATE_HASH_SECRET_FILE` names (at least 32 bytes; keep it the same across
//! restarts, or a replay of an earlier call answers `conflict`). Without either, the server says
//! on stderr that it uses toolgate's public local default, which protects no argument.
//!
//! A run here is an MCP session, which a desktop client keeps open for as long as it runs, so
//! the dispatcher puts no limit on a run's turns, calls or attempts (the default limits, 50
//! turns, would end a desktop session after 50 calls); each tool's own retry policy and rate
//! limit still apply. A reconciler runs in the background (a pass every 5 seconds): a refund
//! whose outcome was unknown is settled by asking the provider under the operation's key.
//!
//! A refund over 5000 waits for a manager's approval: the model reads `awaiting_approval` with
//! the approval's id. A manager decides with the operator's command line on the same database,
//! while the server runs, signed in with a token of acme's issuer (made once with `operators
//! init`; its secret key stays in the file, the database gets its public key):
//!
//! ```sh
//! export TOOLGATE_STORE=sqlite:PATH
//! cargo run -p toolgate-cli -- operators init --issuer acme-ops --tenant acme \
//!     --secret-file acme-ops.jwk
//! export TOOLGATE_TOKEN=$(cargo run -q -p toolgate-cli -- operators issue \
//!     --secret-file acme-ops.jwk --subject manager --permission refund:approve)
//! cargo run -p toolgate-cli -- approvals list
//! cargo run -p toolgate-cli -- approvals approve ID --reason "…"
//! ```
//!
//! The server's runner of approved operations (a pass every second; `--approvals-every-ms N`)
//! then runs the approved refund once, under its original key, as the client that asked for it,
//! and says so on stderr; the model's next call with the same arguments reads its outcome as a
//! replay. Whichever comes first runs it, never both.

mod flags;
mod tokens;

use std::process::ExitCode;
use std::time::Duration;

use crate::payments::client::HttpPayments;
use crate::payments::server::PaymentsServer;
use crate::shop::{self, Provider, money};
use tokio::net::TcpListener;
use tokio::sync::watch;
use toolgate::mcp::{McpServer, SessionHook, StdioSession};
use toolgate::store::SqliteStore;
use toolgate::{Dispatcher, RunLimits, idempotency::HashSecret, reconcile::Reconciler};

use flags::{Flags, Serve, USAGE};
use tokens::TokenTable;

/// What the model is told about the shop when it connects.
const INSTRUCTIONS: &str = "The toolgate demo shop has four orders, ORD-1001 to ORD-1004. \
     get_order reads one; issue_refund refunds part or all of one (a refund over 5000 waits for \
     a manager's approval); update_crm_and_notify records the outcome in the customer's record \
     and tells the customer. A write asked again with the same order is answered from its record, \
     marked replayed, and never applied twice.";

/// How often the reconciler looks for operations whose outcome is unknown.
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// Runs the MCP server with the process's arguments (the flags the module's docs list), as the
/// `mcp_server` example and binary do; answers the exit status.
pub fn main() -> ExitCode {
    let flags = match flags::parse(std::env::args().skip(1)) {
        Ok(Some(flags)) => flags,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("mcp_server: {problem}\n{USAGE}");
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
            eprintln!("mcp_server: {problem}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the store and the provider, serves until the client leaves (stdio) or a signal comes
/// (HTTP), then stops the reconciler and closes the store.
async fn run(flags: Flags) -> Result<(), String> {
    let store = SqliteStore::open(&flags.db)
        .await
        .map_err(|err| format!("cannot open the SQLite store {}: {err}", flags.db.display()))?;
    let url = match flags.provider_url {
        Some(url) => url,
        None => start_provider(&flags.db).await?,
    };
    let payments = HttpPayments::new(&url, flags.provider_timeout)?;
    let hash_secret = match HashSecret::from_env().map_err(|err| err.to_string())? {
        Some(secret) => secret,
        None => {
            eprintln!(
                "mcp_server: no TOOLGATE_HASH_SECRET or TOOLGATE_HASH_SECRET_FILE, so request \
                 hashes are keyed with toolgate's public local default, which protects no \
                 argument (fine for local use)"
            );
            HashSecret::local_default()
        }
    };
    let dispatcher = Dispatcher::builder(shop::registry())
        .store(store.clone())
        .hash_secret(hash_secret)
        .state(Provider::new(payments))
        // A run is an MCP session, as long as the client keeps it: no limit of turns or calls.
        .run_limits(RunLimits::UNLIMITED)
        .try_build()
        .map_err(|err| err.to_string())?;
    let (stop, stopped) = watch::channel(false);
    let reconciler = Reconciler::new(&dispatcher);
    let mut reconciler_stop = stopped.clone();
    let reconciling = tokio::spawn(async move {
        reconciler
            .run(RECONCILE_EVERY, async move {
                let _ = reconciler_stop.wait_for(|stop| *stop).await;
            })
            .await
    });
    let running_approved = tokio::spawn(run_approved(
        dispatcher.clone(),
        flags.approvals_every,
        stopped,
    ));
    let served = serve(
        dispatcher,
        flags.serve,
        flags.additional_properties,
        &flags.db.display().to_string(),
    )
    .await;
    let _ = stop.send(true);
    if let Ok(Err(err)) = reconciling.await {
        eprintln!("mcp_server: the reconciler stopped: {err}");
    }
    let _ = running_approved.await;
    store.close().await;
    served
}

/// The runner of approved operations: a pass every `every` until `stop` turns true, each
/// running the operations a manager approved that no call has run yet.
async fn run_approved(dispatcher: Dispatcher, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut passes = tokio::time::interval(every);
    passes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return,
            _ = passes.tick() => {}
        }
        match dispatcher.run_approved(100).await {
            Ok(pass) => {
                for expired in pass.expired {
                    eprintln!(
                        "mcp_server: the approval {} of {} expired undecided",
                        expired.id, expired.tool
                    );
                }
                for executed in pass.executed {
                    eprintln!(
                        "mcp_server: ran the approved {} of approval {}: {}",
                        executed.approval.tool,
                        executed.approval.id,
                        executed.result.status.as_str()
                    );
                }
            }
            Err(err) => eprintln!("mcp_server: the runner of approved operations failed: {err}"),
        }
    }
}

/// Starts the fake payment provider in process, its ledger beside the database; answers its URL.
async fn start_provider(db: &std::path::Path) -> Result<String, String> {
    let mut ledger = db.as_os_str().to_owned();
    ledger.push(".ledger.jsonl");
    let announce = Box::new(|receipt: &shop::Receipt| {
        eprintln!(
            "mcp_server: the provider applied {} on {}: {}",
            receipt.refund_id,
            receipt.order_id,
            money(receipt.amount_cents)
        );
    });
    let server = PaymentsServer::open(&ledger, Some(announce)).map_err(|err| {
        format!(
            "cannot start the payment provider on the ledger {}: {err}",
            ledger.display()
        )
    })?;
    let addr = server
        .spawn()
        .await
        .map_err(|err| format!("cannot start the payment provider: {err}"))?;
    Ok(format!("http://{addr}"))
}

/// The shop's MCP server, its clients identified by `hook`.
/// `additional_properties` false serves the schemas without that keyword
/// (`--no-additional-properties`).
fn server(
    dispatcher: Dispatcher,
    hook: impl SessionHook,
    additional_properties: bool,
) -> Result<McpServer, String> {
    let mut builder = McpServer::builder(dispatcher, hook)
        .name("toolgate-shop")
        .title("toolgate demo shop")
        .version(env!("CARGO_PKG_VERSION"))
        .instructions(INSTRUCTIONS);
    if !additional_properties {
        builder = builder.schemas_without_additional_properties();
    }
    builder.try_build().map_err(|err| err.to_string())
}

/// Serves on stdio or HTTP, as the flags say.
async fn serve(
    dispatcher: Dispatcher,
    serve: Serve,
    additional_properties: bool,
    db: &str,
) -> Result<(), String> {
    match serve {
        Serve::Stdio(auth) => {
            let hook = StdioSession::new(auth);
            let permissions: Vec<&str> = hook.auth().permissions().collect();
            eprintln!(
                "mcp_server: serving the demo shop on stdio to {}/{} [{}]; operations in {db}",
                hook.auth().tenant(),
                hook.auth().user(),
                permissions.join(", "),
            );
            server(dispatcher, hook, additional_properties)?
                .serve_stdio()
                .await
                .map_err(|err| err.to_string())
        }
        Serve::Http { addr, tokens } => {
            let server = server(dispatcher, TokenTable::new(tokens), additional_properties)?;
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|err| format!("cannot listen on {addr}: {err}"))?;
            let bound = listener
                .local_addr()
                .map_err(|err| format!("no local address: {err}"))?;
            eprintln!("mcp_server: listening on http://{bound}; operations in {db}");
            server.serve_http(listener, shutdown()).await;
            eprintln!("mcp_server: stopped");
            Ok(())
        }
    }
}

/// Ctrl-C, or SIGTERM where there is one.
async fn shutdown() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
