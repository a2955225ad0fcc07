//! How long a call waits for an operation store that does not answer, and what this dispatcher
//! knows of the store's reach meanwhile.
//!
//! The rules:
//!
//! - A write waits for a store that cannot be reached at most the store wait
//!   ([`DEFAULT_STORE_WAIT`], 5 s; `DispatcherBuilder::store_wait`) in all: what its turn's
//!   counters waited, its look-up before a business check, its claim's tries
//!   ([`DispatcherBuilder::store_retry`](crate::dispatch::DispatcherBuilder::store_retry)) and the
//!   backoffs between them. A try still waiting at the end of it is cut, and the call answers
//!   `unavailable`. Only the time of a store that did not answer is spent.
//!   Recording an outcome after the tool ran, and storing a run's abort, wait at most the store
//!   wait too, counted from their own start.
//! - The run's counters ask the store at most the counter wait ([`DEFAULT_COUNTER_WAIT`],
//!   250 ms; `DispatcherBuilder::counter_wait`); past it, the session counts in the store's
//!   place. The session mirrors every count the store answers, so that for a run that one
//!   session drives it counts exactly what the store would; a run shared by several processes
//!   counts, meanwhile, only this session's calls.
//! - Once a store operation could not reach the store, this dispatcher knows it is out of
//!   reach until one reaches it again: meanwhile the run's counters do not ask it (but once a
//!   second, to see whether it answers again) and audit records are kept in memory at once
//!   ([`KEPT_AUDIT_RECORDS`](crate::dispatch::KEPT_AUDIT_RECORDS)). A read, which needs no store, is
//!   then answered without waiting for it; every write's claim still asks the store, so the
//!   first one after the store is back runs and ends the outage.
//!
//! A cut try may have reached the store after all: a claim cut after its insert committed
//! leaves a `processing` record that nothing runs under, which the same call meets as
//! `in_progress` until its lease ends, and then as `outcome_unknown` for the reconciler to
//! settle (its hook answers not applied). A cut count may be missing from the store; the
//! session holds it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::StoreError;

/// How long a call waits, in all, for an operation store that cannot be reached before it
/// answers `unavailable`: 5 s.
pub const DEFAULT_STORE_WAIT: Duration = Duration::from_secs(5);

/// How long the run's counters wait for the operation store before the session counts in its
/// place: 250 ms.
pub const DEFAULT_COUNTER_WAIT: Duration = Duration::from_millis(250);

/// While the store is out of reach, how often the run's counters ask it whether it answers.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What this dispatcher knows of its store's reach.
#[derive(Debug)]
pub(super) struct Reach {
    /// Set from a store operation that could not reach the store to one that did.
    down: AtomicBool,
    /// When the counters last asked the store while it was out of reach, in milliseconds
    /// since `epoch`.
    last_probe_ms: AtomicU64,
    epoch: Instant,
}

impl Default for Reach {
    fn default() -> Self {
        Reach {
            down: AtomicBool::new(false),
            last_probe_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Reach {
    /// Whether the store is known to be out of reach.
    pub(super) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Notes what a store operation met: an answer, or a store it could not reach.
    pub(super) fn note<T>(&self, result: &Result<T, StoreError>) {
        match result {
            Err(err) if err.is_unreachable() => {
                if !self.down.swap(true, Ordering::Relaxed) {
                    self.last_probe_ms
                        .store(self.elapsed_ms(), Ordering::Relaxed);
                    tracing::warn!(error = %err, "the operation store is out of reach: the run's counters and the audit trail are kept in this process until it answers");
                }
            }
            _ => {
                if self.is_down() && self.down.swap(false, Ordering::Relaxed) {
                    tracing::info!("the operation store answers again");
                }
            }
        }
    }

    /// Whether the run's counters ask the store now: always while it is in reach, and once a
    /// [`PROBE_EVERY`] while it is not.
    pub(super) fn counters_ask(&self) -> bool {
        if !self.is_down() {
            return true;
        }
        let now = self.elapsed_ms();
        let last = self.last_probe_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= PROBE_EVERY.as_millis() as u64
            && self
                .last_probe_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// What is left of one call's wait for a store that cannot be reached: only what such a store
/// took (a failed try, a try cut at the end of the wait, the backoff after it) is spent; a
/// store that answers, however slowly, spends none of it.
#[derive(Debug, Clone, Copy)]
pub(super) struct StoreWait {
    left: Duration,
}

impl StoreWait {
    pub(super) fn new(left: Duration) -> Self {
        StoreWait { left }
    }

    /// What is left.
    pub(super) fn left(&self) -> Duration {
        self.left
    }

    /// `op`, cut when it takes longer than what is left; the time of a try that did not reach
    /// the store is spent.
    pub(super) async fn run<T>(
        &mut self,
        doing: &'static str,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let done = by(started + self.left, doing, op).await;
        if matches!(&done, Err(err) if err.is_unreachable()) {
            self.spend(started.elapsed());
        }
        done
    }

    /// Spends `waited` (a backoff between tries).
    pub(super) fn spend(&mut self, waited: Duration) {
        self.left = self.left.saturating_sub(waited);
    }
}

/// `op`, cut at `deadline`: a store that has not answered by then counts as out of reach.
pub(super) async fn by<T>(
    deadline: Instant,
    doing: &'static str,
    op: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout_at(deadline, op).await {
        Ok(done) => done,
        Err(_) => Err(StoreError::unreachable(doing, NoAnswer)),
    }
}

/// A store operation cut at the end of its wait.
#[derive(Debug)]
struct NoAnswer;

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the store did not answer within the wait")
    }
}

impl std::error::Error for NoAnswer {}
