//! Chaos for a tool's own provider (feature `chaos`): the faults that make a write's outcome
//! hard to know, played on the requests a tool sends, so that a test can prove the tool keeps
//! toolgate's promise under them: a request refused before the provider is `unavailable` (and
//! safe to retry), one applied and answered never is `outcome_unknown` (never `failed`), and a
//! retry under the same idempotency key is applied once.
//!
//! - [`FaultProxy`]: an HTTP/1.1 reverse proxy on a loopback port in front of the provider;
//!   point the tool's base URL at [`FaultProxy::url`];
//! - [`FaultHook`]: the same faults for a provider that is not HTTP, played by the tool itself
//!   around its call;
//! - [`FaultPlan`]: which requests misbehave, chosen by [`Route`] (a method and a path prefix)
//!   and by count ("the 2nd and 3rd `POST /refunds`", "the next 3 requests to `/refunds`"),
//!   and the [`Record`] of every request seen, with its idempotency key. The proxy and the hook
//!   share it;
//! - [`Fault`]: a `503` or a `429` answered in the provider's place, the provider's answer
//!   dropped or the connection reset after the provider applied the request, or a delay.
//!
//! On top of them, stories: what happens to a tool, played under the application's own
//! dispatcher and checked against the promises toolgate makes.
//!
//! - [`Story`]: a script of [`StoryLine`]s, JSON Lines as the refund desk's scripts are (model
//!   turns in each provider format, `run` lines with the run's limits, `fault` lines for the
//!   plan, `restart`, a second `process` on the same store, `reconcile`, `approve` / `reject`,
//!   `run_approved`, `deliver` for the outbox worker, `act` for what else the application
//!   does between turns), read with [`Story::from_jsonl`], built in
//!   code, and written back with [`Story::to_jsonl`];
//! - [`Stage`]: what the application gives: how to open its store (again at each restart and
//!   for each process), how to build its dispatcher on it, the [`FaultPlan`] of its provider,
//!   its reconciler's setup, its outbox worker and its acts;
//! - [`play`]: plays a story on a stage, then one last reconcile pass, and answers what it did
//!   ([`Played`]: each turn's call ids and their answers, each pass and decision, the store's
//!   operations and the plan's requests);
//! - [`Played::check`]: given the effects the provider applied ([`Applied`], from its own
//!   authoritative state), finds every [`Violation`]: a call id answered other than once, a
//!   business operation applied twice, an effect no `succeeded` operation accounts for, an
//!   outcome left unknown for a tool with a reconcile hook, a refused call that reached the
//!   provider. Each says what failed and what usually causes it.
//! - [`Storm`]: stories drawn from the tools' schemas with proptest (valid and invalid calls,
//!   repeats, parallel batches, faults, restarts, a second process, reconcile passes), each
//!   played by the application on a fresh stage; the first that fails is shrunk to the
//!   shortest story that fails the same way ([`Caught`]), written to a file and printed with
//!   the one command that replays it.
//!
//! A dropped answer holds the client's connection until the client gives up: the tool's own
//! deadline decides, as it would against a provider that stopped answering. A reset is a TCP
//! `RST` (`SO_LINGER` set to zero on the client's socket as it closes, with tokio's
//! `set_zero_linger`). Nothing in the proxy waits on a timer but a planned [`Fault::Delay`],
//! which runs on tokio's clock.
//!
//! # Examples
//!
//! A tool's HTTP client put through a dropped answer: the provider applies the refund, the
//! client's deadline passes, and the retry under the same key finds it applied.
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use toolgate_test::chaos::{Fault, FaultProxy, Route, Upstream};
//!
//! # async fn refund(base_url: &str, key: &str) -> Result<(), ()> { Ok(()) }
//! # async fn run(provider: SocketAddr) -> std::io::Result<()> {
//! let proxy = FaultProxy::start(provider).await?;
//! let refunds = Route::post("/refunds");
//! proxy.plan().at(refunds.clone(), [1], Fault::DropAfterApply);
//!
//! // The tool's client, with a deadline of its own, posts to `{base_url}/refunds`.
//! let first = tokio::time::timeout(Duration::from_secs(2), refund(&proxy.url(), "k1")).await;
//! assert!(first.is_err(), "the answer never came");
//! // The provider answered the proxy, which kept the answer: the refund was applied.
//! proxy
//!     .plan()
//!     .wait_for(|records| records.first().is_some_and(|r| matches!(r.upstream, Upstream::Answered(_))))
//!     .await;
//! refund(&proxy.url(), "k1").await.expect("the retry goes through");
//! assert_eq!(proxy.plan().keys(&refunds), ["k1", "k1"], "one key for both");
//! proxy.shutdown().await;
//! # Ok(())
//! # }
//! ```

//!
//! A story played on a refund tool and checked against the provider's ledger: the model's
//! answer is lost after the provider applied the refund, the model asks again, the reconciler
//! settles it, and the refund must be applied once and accounted for.
//!
//! ```no_run
//! use std::path::PathBuf;
//! use std::sync::Arc;
//! use toolgate::prelude::*;
//! use toolgate::store::{OperationStore, SqliteStore};
//! use toolgate_test::chaos::{Applied, FaultProxy, Stage, Story, play};
//!
//! # fn registry(proxy_url: &str) -> Registry { Registry::new() }
//! # fn refunds_at_provider() -> Vec<(String, Option<String>)> { Vec::new() }
//! # async fn run(provider: std::net::SocketAddr, path: PathBuf) -> Result<(), Box<dyn std::error::Error>> {
//! let proxy = FaultProxy::start(provider).await?;
//! let url = proxy.url();
//! let stage = Stage::new(
//!     move || {
//!         let path = path.clone();
//!         async move { Ok(Arc::new(SqliteStore::open(&path).await?) as Arc<dyn OperationStore>) }
//!     },
//!     move |store| Dispatcher::builder(registry(&url)).store(store).build(),
//! )
//! .with_plan(proxy.plan().clone());
//!
//! let story = Story::from_jsonl(r#"
//! {"session": {"tenant": "acme", "user": "agent", "permissions": ["refund:create"]}}
//! {"fault": {"route": "POST /refunds", "kind": "drop_after_apply", "times": 1}}
//! {"openai": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1\"}"}}]}}
//! {"openai": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1\"}"}}]}}
//! {"reconcile": {}}
//! "#)?;
//! let played = play(&stage, &story).await?;
//! // The provider's ledger: each refund by its order and the key it was applied under.
//! let applied = || {
//!     refunds_at_provider()
//!         .into_iter()
//!         .map(|(order, key)| Applied::new(format!("refund {order}"), key))
//! };
//! if let Err(violations) = played.check(applied) {
//!     panic!("{violations}\nthe story:\n{}", story.to_jsonl());
//! }
//! # Ok(())
//! # }
//! ```

mod fault;
mod forward;
mod hook;
mod hop_by_hop;
mod invariants;
mod lifetime;
mod line;
mod plan;
mod play;
mod played;
mod playing;
mod proxy;
mod record;
mod reset;
mod route;
mod stage;
mod storm;
mod story;
mod violation;

pub use fault::Fault;
pub use hook::{AnswerLost, FaultHook, NotReached, Sent};
pub use invariants::Applied;
pub use line::{StoryLine, TurnFormat};
pub use plan::FaultPlan;
pub use played::{Answer, Answered, AskedCall, Played, PlayedTurn, TurnOutcome};
pub use playing::{PlayError, play};
pub use proxy::{DEFAULT_BODY_LIMIT, DEFAULT_KEY_HEADER, FaultProxy, FaultProxyBuilder};
pub use record::{Record, Upstream};
pub use route::Route;
pub use stage::Stage;
pub use storm::{Caught, SEED_VAR, STORIES_VAR, STORY_VAR, Storm, Survived};
pub use story::{Story, StoryError};
pub use violation::{Violation, Violations};
