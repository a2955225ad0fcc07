//! The desk: the demo tools behind a dispatcher on a durable store, driven one script line at a
//! time, each line answered as `examples/scenarios/README.md` says and told to the narrator.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::{Anthropic, OpenAiChat, WireFormat};
use toolgate::store::{OperationStore, PostgresStore, SqliteStore};
use toolgate::{
    RunLimits, ToolCall, dispatch::Clock, dispatch::SystemClock, idempotency::HashSecret,
    reconcile::Reconciler, run::CallFate, run::Fate, run::TurnAborted, tool::Delivery,
};

use crate::payments::client::HttpPayments;
use crate::shop::{self, Payments, Provider};

use crate::refund_desk::narrate::{Narrator, Voice};

mod approvals;
mod outbox;

pub use outbox::{create_tables, worker};

/// Who calls before a script's `session` line: tenant `acme`, user `agent`, with
/// `orders:read` and `refund:create`.
pub fn default_auth() -> AuthContext {
    AuthContext::new("acme", "agent").with_permissions(["orders:read", "refund:create"])
}
mod progress;
use crate::refund_desk::script::{Dialect, Line, shortened};

/// Where the operations are kept: `--store sqlite:PATH` or `--store postgres://…`.
#[derive(Debug, Clone)]
pub enum StoreSpec {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL.
    Postgres(String),
}

impl StoreSpec {
    /// The `--store` value `text`, or what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<StoreSpec, String> {
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("`sqlite:` needs a path: --store sqlite:PATH".to_owned());
            }
            return Ok(StoreSpec::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(StoreSpec::Postgres(text.to_owned()));
        }
        Err(format!(
            "`{text}` is not a store: write sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE"
        ))
    }
}

/// An open store, kept typed so that a restart can close it.
enum OpenStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl OpenStore {
    async fn open(spec: &StoreSpec) -> Result<OpenStore, String> {
        match spec {
            StoreSpec::Sqlite(path) => SqliteStore::open(path)
                .await
                .map(OpenStore::Sqlite)
                .map_err(|err| format!("cannot open the SQLite store {}: {err}", path.display())),
            StoreSpec::Postgres(url) => PostgresStore::connect(url)
                .await
                .map(OpenStore::Postgres)
                .map_err(|err| format!("cannot open the PostgreSQL store: {err}")),
        }
    }

    fn shared(&self) -> Arc<dyn OperationStore> {
        match self {
            OpenStore::Sqlite(store) => Arc::new(store.clone()),
            OpenStore::Postgres(store) => Arc::new(store.clone()),
        }
    }

    async fn close(&self) {
        match self {
            OpenStore::Sqlite(store) => store.close().await,
            OpenStore::Postgres(store) => store.close().await,
        }
    }
}

/// The system clock set ahead: a desk restarted after a crash with `--clock-ahead-secs` sees the
/// leases of the killed process as expired, as a desk restarted that much later would.
#[derive(Debug)]
struct AheadClock {
    ahead_ms: i64,
}

impl Clock for AheadClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.ahead_ms)
    }
}

/// How the desk is set up.
pub(crate) struct Options {
    /// Where the operations are kept.
    pub(crate) store: StoreSpec,
    /// The payment provider's client.
    pub(crate) payments: HttpPayments,
    /// How far ahead of the system clock the desk's clock runs.
    pub(crate) clock_ahead: Duration,
    /// Who hears the story.
    pub(crate) narrator: Narrator,
    /// Explain each outcome, for a person watching (the narrated story).
    pub(crate) explain: bool,
    /// How `issue_refund` is delivered until a `delivery` line says otherwise.
    pub(crate) delivery: Delivery,
}

/// The desk between two lines of a script.
pub(crate) struct Desk {
    spec: StoreSpec,
    /// The store and the dispatcher on it; `None` after a restart could not reopen the store,
    /// until a line that needs them reopens it.
    open: Option<(OpenStore, Dispatcher)>,
    payments: HttpPayments,
    clock: Arc<dyn Clock>,
    /// Who calls and in which run; a `session` or `run` line replaces it.
    session: Session,
    narrator: Narrator,
    explain: bool,
    /// How `issue_refund` is delivered: directly, or through the outbox.
    delivery: Delivery,
    /// The secret that keys request hashes (see [`hash_secret`]).
    hash_secret: HashSecret,
}

impl Desk {
    /// Opens the store and builds the dispatcher, with the default session and run of
    /// `examples/scenarios/README.md`.
    pub(crate) async fn open(options: Options) -> Result<Desk, String> {
        let store = OpenStore::open(&options.store).await?;
        create_tables(&options.store).await?;
        let clock: Arc<dyn Clock> = Arc::new(AheadClock {
            ahead_ms: i64::try_from(options.clock_ahead.as_millis()).unwrap_or(i64::MAX),
        });
        let auth = default_auth();
        let hash_secret = hash_secret()?;
        let dispatcher = dispatcher(
            &store,
            &options.payments,
            &clock,
            options.delivery,
            &hash_secret,
        );
        Ok(Desk {
            spec: options.store,
            open: Some((store, dispatcher)),
            payments: options.payments,
            clock,
            session: Session::new(auth, "run-1"),
            narrator: options.narrator,
            explain: options.explain,
            delivery: options.delivery,
            hash_secret,
        })
    }

    /// The payment provider's client.
    /// Writes the audit records of the last reads (a read answers before its record is
    /// written), before the process ends.
    pub(crate) async fn close(&self) {
        if let Some((_, dispatcher)) = &self.open {
            dispatcher.flush_audit().await;
        }
    }

    pub(crate) fn payments(&self) -> &HttpPayments {
        &self.payments
    }

    /// Plays one line: its answer, if the line has one, or what is wrong with the line.
    pub(crate) async fn play(&mut self, text: &str) -> Result<Option<Value>, String> {
        match Line::parse(text)? {
            Line::Session(auth) => {
                let permissions = auth.permissions().collect::<Vec<_>>().join(", ");
                self.say(
                    Voice::Title,
                    &format!(
                        "session: tenant {}, user {}, permissions [{permissions}]",
                        auth.tenant(),
                        auth.user()
                    ),
                );
                let session = Session::new(auth, self.session.run_id());
                self.session = match self.session.limits() {
                    Some(limits) => session.with_limits(limits),
                    None => session,
                };
                Ok(None)
            }
            Line::Run(run_id, limits) => {
                let session = Session::new(self.session.auth().clone(), run_id.as_str());
                self.session = match limits {
                    Some(limits) => {
                        self.say(
                            Voice::Title,
                            &format!("── run {run_id} ({}) ──", limits_story(&limits)),
                        );
                        session.with_limits(limits)
                    }
                    None => {
                        self.say(Voice::Title, &format!("── run {run_id} ──"));
                        session
                    }
                };
                Ok(None)
            }
            Line::Turn(dialect, message) => Ok(Some(self.turn(dialect, message).await?)),
            Line::Fault(spec) => {
                self.payments.arm_fault(&spec).await?;
                self.say(Voice::Trouble, &fault_story(&spec));
                Ok(None)
            }
            Line::Reconcile => Ok(Some(self.reconcile().await?)),
            Line::Restart => {
                self.restart().await?;
                Ok(None)
            }
            Line::Decide {
                verdict,
                approver,
                reason,
            } => Ok(Some(self.decide(verdict, &approver, &reason).await?)),
            Line::RunApproved => Ok(Some(self.run_approved().await?)),
            Line::Delivery(delivery) => {
                self.set_delivery(delivery).await?;
                Ok(None)
            }
            Line::Deliver => Ok(Some(self.deliver().await?)),
            Line::ProviderRefund {
                order_id,
                amount_cents,
                key,
            } => {
                self.say(
                    Voice::Trouble,
                    &format!(
                        "someone refunds {} of {order_id} at the provider, outside the agent",
                        shop::money(amount_cents)
                    ),
                );
                Payments::refund(&self.payments, &key, &order_id, amount_cents)
                    .await
                    .map_err(|err| format!("the provider refused the refund: {err}"))?;
                Ok(None)
            }
        }
    }

    /// One model turn, `message` as the provider sent it: read by the provider format.
    async fn turn(&mut self, dialect: Dialect, message: &str) -> Result<Value, String> {
        let format: Box<dyn WireFormat + Send + Sync> = match dialect {
            Dialect::OpenAi => Box::new(OpenAiChat { strict: false }),
            Dialect::Anthropic => Box::new(Anthropic::default()),
        };
        let calls = format
            .parse_calls_text(message)
            .map_err(|err| err.to_string())?;
        for call in &calls {
            self.say(Voice::Model, &call_story(call));
        }
        let sent: Vec<(String, String)> = calls
            .iter()
            .map(|call| (call.id.clone(), call.name.clone()))
            .collect();
        let dispatcher = self.dispatcher().await?;
        match dispatcher.dispatch_turn(&self.session, calls).await {
            Ok(reports) => {
                for report in &reports {
                    self.tell_result(report);
                    self.tell_progress(&report.result);
                }
                Ok(json!({ dialect.key(): format.render_results(&reports) }))
            }
            Err(aborted) => Ok(self.tell_abort(&aborted, &sent)),
        }
    }

    /// A turn that aborted the run: the reason, and what became of each of its calls, for the
    /// application (the model is told only that the run stopped).
    /// `sent` are the turn's calls, id and tool, as the model sent them.
    fn tell_abort(&self, aborted: &TurnAborted, sent: &[(String, String)]) -> Value {
        let kind = aborted.reason.kind.as_str();
        self.say(
            Voice::Bad,
            &format!("the run is aborted ({kind}): {}", aborted.reason.reason),
        );
        if aborted.calls.is_empty() {
            // A turn of a run aborted before it: none of its calls ran.
            for (id, tool) in sent {
                self.say(
                    Voice::Bad,
                    &format!(
                        "  {} {}: not started (the run was aborted before this turn)",
                        shortened(id, 80),
                        shortened(tool, 80)
                    ),
                );
            }
        }
        let calls: Vec<Value> = aborted
            .calls
            .iter()
            .map(|call| {
                self.tell_fate(call);
                json!({"id": call.call_id, "tool": call.tool, "status": call.fate.status()})
            })
            .collect();
        let why = match aborted.reason.kind {
            ErrorKind::PermissionDenied => {
                "A run that lacks a permission stops, and every call of the turn is checked \
                 before any runs: the model does not get to try around it."
            }
            ErrorKind::RunBudgetExhausted => {
                "The run reached its limits: it stops here, and so does a model that would go on \
                 looping."
            }
            _ => "The run stopped: calls not started never start, and later turns run nothing.",
        };
        self.aside(why);
        json!({"run_aborted": {"kind": kind, "reason": aborted.reason.reason, "calls": calls}})
    }

    /// What became of one call of a turn that aborted the run, in words.
    fn tell_fate(&self, call: &CallFate) {
        let head = format!(
            "  {} {}",
            shortened(&call.call_id, 80),
            shortened(&call.tool, 80)
        );
        match &call.fate {
            Fate::Answered(result) => {
                let voice = if result.is_succeeded() {
                    Voice::Good
                } else {
                    Voice::Bad
                };
                let detail = match (result.data(), result.explanation()) {
                    (_, Some(error)) => format!(" ({}) {}", error.kind, error.what),
                    (Some(data), None) => format!(" {}", data.to_value()),
                    (None, None) => String::new(),
                };
                self.say(
                    voice,
                    &format!("{head}: ran, {}{detail}", result.status.as_str()),
                );
            }
            Fate::Aborted => self.say(Voice::Bad, &format!("{head}: aborted the run")),
            Fate::Cancelled => self.say(
                Voice::Bad,
                &format!("{head}: cancelled while it ran (a read: it changed nothing)"),
            ),
            Fate::NotStarted => self.say(
                Voice::Bad,
                &format!("{head}: not started (nothing of it was sent)"),
            ),
            other => self.say(Voice::Bad, &format!("{head}: {}", other.status())),
        }
    }

    fn tell_result(&self, report: &CallReport) {
        let result = &report.result;
        let status = result.status.as_str();
        let replayed = result.replayed;
        let head = format!(
            "toolgate → {} {}: {status}{}",
            shortened(&report.call_id, 80),
            shortened(&report.tool, 80),
            if replayed { " (replayed)" } else { "" }
        );
        match (result.data(), result.explanation()) {
            (None, None) => self.say(Voice::Good, &head),
            (Some(data), None) => self.say(Voice::Good, &format!("{head} {}", data.to_value())),
            (_, Some(error)) => {
                let kind = error.kind;
                let mut text = if kind.as_str() == status {
                    format!("{head} {}", error.what)
                } else {
                    format!("{head} ({kind}) {}", error.what)
                };
                for (label, part) in [("why", error.why.as_deref()), ("next", Some(&*error.next))] {
                    if let Some(part) = part {
                        text.push_str(&format!("\n      {label}: {part}"));
                    }
                }
                let voice = if result.is_succeeded() {
                    Voice::Good
                } else {
                    Voice::Bad
                };
                self.say(voice, &text);
                if replayed && kind == ErrorKind::OutcomeUnknown {
                    self.aside(
                        "Asked again under the same key while the first refund's outcome is \
                         unknown: toolgate says so instead of sending a second refund.",
                    );
                    return;
                }
                self.explain_kind(kind);
            }
        }
        if replayed {
            self.aside(
                "Replayed from the store: the same request under the same key, answered with the \
                 recorded outcome; the payment provider was not called again.",
            );
        }
    }

    fn explain_kind(&self, kind: ErrorKind) {
        let why = match kind {
            ErrorKind::OutcomeUnknown => {
                "The refund was sent and no answer came: the provider may have applied it. \
                 toolgate records outcome_unknown, never failed, and will not send this refund \
                 again on its own; the reconciler asks the provider what happened."
            }
            ErrorKind::InvalidArguments => {
                "Rejected before anything ran: the model is told every violation, with its JSON \
                 pointer, and can correct the call."
            }
            ErrorKind::Conflict => {
                "Same order, same run, another amount: the key is the same and the request is \
                 not, so nothing runs and nothing is stored for it."
            }
            ErrorKind::Refused => {
                "The business rule said no before anything was sent to the provider."
            }
            ErrorKind::AwaitingApproval => {
                "Over the tool's approval threshold: nothing was sent. The refund waits, in the \
                 store, for an approver of the tenant who is not the one asking."
            }
            ErrorKind::Rejected => {
                "Rejected, so never sent: by an approver, by an expiry, or by the checks made \
                 again before an approved refund runs."
            }
            _ => return,
        };
        self.aside(why);
    }

    async fn reconcile(&mut self) -> Result<Value, String> {
        let dispatcher = self.dispatcher().await?;
        let report = Reconciler::new(&dispatcher)
            .run_once()
            .await
            .map_err(|err| format!("the reconciler failed: {err}"))?;
        self.say(
            Voice::Title,
            &format!(
                "reconciler: {} settled as applied, {} as not applied, {} still unknown",
                report.succeeded, report.failed, report.still_unknown
            ),
        );
        if report.expired_leases > 0 {
            self.say(
                Voice::Trouble,
                &format!(
                    "  {} operation(s) held by a process that died were marked outcome_unknown first",
                    report.expired_leases
                ),
            );
        }
        if report.succeeded > 0 {
            self.aside(
                "The reconciler asked the provider for the refund under the operation's key: it \
                 was applied, so the operation is now succeeded with the provider's answer.",
            );
        }
        Ok(json!({"reconciled": {
            "succeeded": report.succeeded,
            "failed": report.failed,
            "still_unknown": report.still_unknown,
        }}))
    }

    async fn restart(&mut self) -> Result<(), String> {
        self.say(
            Voice::Trouble,
            "restart: the dispatcher is dropped and the store reopened",
        );
        if let Some((store, _)) = self.open.take() {
            store.close().await;
        }
        self.reopen().await
    }

    /// The dispatcher, on a store reopened first if a restart left the desk without one.
    async fn dispatcher(&mut self) -> Result<Dispatcher, String> {
        if self.open.is_none() {
            self.reopen().await?;
        }
        match &self.open {
            Some((_, dispatcher)) => Ok(dispatcher.clone()),
            None => Err("the store is not open".to_owned()),
        }
    }

    /// Opens the store and a dispatcher on it. When the store cannot be opened (its database is
    /// down), the desk stays without one and the next line that needs it tries again.
    async fn reopen(&mut self) -> Result<(), String> {
        let store = OpenStore::open(&self.spec).await.map_err(|err| {
            format!("{err}; the desk opens it again on the next line that needs it")
        })?;
        let dispatcher = dispatcher(
            &store,
            &self.payments,
            &self.clock,
            self.delivery,
            &self.hash_secret,
        );
        self.open = Some((store, dispatcher));
        Ok(())
    }

    fn say(&self, voice: Voice, text: &str) {
        self.narrator.say(voice, text);
    }

    fn aside(&self, text: &str) {
        if self.explain {
            self.narrator.say(Voice::Aside, &format!("  · {text}"));
        }
    }
}

/// The secret that keys request hashes: from `TOOLGATE_HASH_SECRET`, or the file
/// `TOOLGATE_HASH_SECRET_FILE` names; without either, toolgate's public local default, and a
/// line on stderr that says it protects nothing.
fn hash_secret() -> Result<HashSecret, String> {
    match HashSecret::from_env().map_err(|err| err.to_string())? {
        Some(secret) => Ok(secret),
        None => {
            eprintln!(
                "refund_desk: no TOOLGATE_HASH_SECRET or TOOLGATE_HASH_SECRET_FILE, so request \
                 hashes are keyed with toolgate's public local default, which protects no \
                 argument (fine for a local demo)"
            );
            Ok(HashSecret::local_default())
        }
    }
}

fn dispatcher(
    store: &OpenStore,
    payments: &HttpPayments,
    clock: &Arc<dyn Clock>,
    delivery: Delivery,
    hash_secret: &HashSecret,
) -> Dispatcher {
    let registry = match delivery {
        Delivery::Outbox => shop::outbox_registry(),
        _ => shop::registry(),
    };
    Dispatcher::builder(registry)
        .store(store.shared())
        .state(Provider::new(payments.clone()))
        .clock(clock.clone())
        // Retries below the model wait a jittered backoff; a fixed seed makes a script's waits
        // the same on every run (its output never depends on them).
        .jitter_seed(0x7e57)
        .hash_secret(hash_secret.clone())
        .build()
}

/// "model → issue_refund {"order_id":"ORD-1001","amount":500}  [call_2]", arguments cut short.
fn call_story(call: &ToolCall) -> String {
    match &call.arguments {
        Ok(arguments) => format!(
            "model → {} {}  [{}]",
            shortened(&call.name, 80),
            shortened(&arguments.to_string(), 200),
            shortened(&call.id, 80)
        ),
        Err(malformed) => format!(
            "model → {} with malformed arguments ({})  [{}]",
            if call.name.is_empty() {
                "?".to_owned()
            } else {
                shortened(&call.name, 80)
            },
            malformed.what,
            shortened(&call.id, 80)
        ),
    }
}

/// "at most 3 turns, 200 tool calls, 6 attempts of each tool".
fn limits_story(limits: &RunLimits) -> String {
    let limit = |value: Option<u32>, what: &str| match value {
        Some(value) => format!("{value} {what}"),
        None => format!("unlimited {what}"),
    };
    format!(
        "at most {}, {}, {}",
        limit(limits.max_steps, "turns"),
        limit(limits.max_tool_calls, "tool calls"),
        limit(limits.retry_budget, "attempts of each tool")
    )
}

/// What an armed fault will do, in words.
fn fault_story(spec: &Value) -> String {
    let operation = spec["operation"].as_str().unwrap_or("?");
    let requests = match spec["times"].as_u64().unwrap_or(1) {
        1 => format!("next {operation} request"),
        times => format!("next {times} {operation} requests"),
    };
    let requests = match spec["order_id"].as_str() {
        Some(order) => format!("{requests} about {}", shortened(order, 40)),
        None => requests,
    };
    let what = match spec["kind"].as_str().unwrap_or("?") {
        "unavailable_before_apply" => "answer 503 and apply nothing".to_owned(),
        "timeout_after_apply" => "be applied, and the answer will not come in time".to_owned(),
        "reset_after_apply" => "be applied, then the connection drops".to_owned(),
        "slow" => format!("wait {} ms before being served", spec["ms"]),
        other => other.to_owned(),
    };
    format!("provider, told: the {requests} will {what}")
}
