//! When the operation store cannot be reached: claims retried below the model, outcomes whose
//! recording failed kept in this process until they land, and the true words the model reads
//! meanwhile.
//!
//! The rules:
//!
//! - A claim that fails with [`StoreError::Unreachable`] is tried again under the store policy
//!   ([`DEFAULT_STORE_RETRY`], or `DispatcherBuilder::store_retry`) within the call's store
//!   wait (see `reach`); then the call answers
//!   [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable): nothing was run.
//! - A retry of a tool's transient fault is recorded before it is sent; when the store cannot
//!   record it, the retry is not sent and the answer says the last attempt failed and nothing
//!   was applied (an unknown outcome stays the tool's own).
//! - An outcome that cannot be recorded after the tool ran is tried again under the same policy,
//!   within a store wait of its own.
//!   When it still does not land, this dispatcher keeps it in memory (the operation's record
//!   stays `processing` under its attempt) and writes it when the store answers again: before
//!   the next claim of the same key, and at the start of every [`Reconciler`](crate::reconcile::Reconciler)
//!   pass ([`Dispatcher::record_unrecorded`]). If the lease expired meanwhile and the record
//!   became `outcome_unknown`, a known success or failure settles it as the reconciler would.
//! - A duplicate never hears that a call "is running" when this dispatcher knows it is not: an
//!   operation kept here is answered `outcome_unknown` (it ran; its outcome is not recorded yet).
//!   A `processing` record held by another worker is answered `in_progress` in words that cover
//!   what is known: it may be running, or it ran and its outcome is not recorded yet.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::ToolError;
use crate::retry::RetryPolicy;
use crate::store::{
    AttemptError, AttemptFailure, AuditEntry, Claim, ClaimRequest, ClaimToken, OperationState,
    OperationStore, Resolution, ResolveRequest, StoreError, Success,
};

use super::held_claim::HeldClaim;
use super::reach::StoreWait;
use super::{Dispatcher, answers};

/// How the dispatcher retries an operation store that could not be reached: 3 tries in all,
/// backoff from 100 ms up to 1 s with full jitter, all within the store wait
/// ([`DEFAULT_STORE_WAIT`](crate::dispatch::DEFAULT_STORE_WAIT), 5 s): a try still waiting at its end is
/// cut. On a stopped PostgreSQL (`toolgate-store-postgres` waits 3 s for a connection), a claim
/// tries twice and gives up at the end of the store wait.
pub const DEFAULT_STORE_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    base: Duration::from_millis(100),
    max: Duration::from_secs(1),
    jitter: true,
};

/// An outcome this dispatcher knows and the store does not hold yet.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    /// The tool answered this result.
    Succeeded(String),
    /// The tool failed in a way that proves nothing was applied.
    Failed(AttemptError),
    /// The tool may have acted; nobody knows.
    Unknown(AttemptError),
}

/// One operation this dispatcher ran and could not record.
#[derive(Debug)]
struct Unrecorded {
    owner: ClaimToken,
    outcome: Outcome,
}

/// The operations this dispatcher ran and could not record yet, by tenant and key.
#[derive(Debug, Default)]
pub(super) struct UnrecordedOutcomes {
    kept: Mutex<HashMap<(String, String), Unrecorded>>,
    /// Whether `kept` may hold anything: every write asks, and almost always none is kept.
    any: AtomicBool,
}

impl UnrecordedOutcomes {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Unrecorded>> {
        // A panic while holding the lock leaves the map as it was: keep using it.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn keep(&self, owner: &ClaimToken, outcome: Outcome) {
        let key = (owner.tenant.clone(), owner.key.clone());
        let owner = owner.clone();
        let mut map = self.map();
        map.insert(key, Unrecorded { owner, outcome });
        self.any.store(true, Ordering::SeqCst);
    }

    fn take(&self, tenant: &str, key: &str) -> Option<Unrecorded> {
        let mut map = self.map();
        let taken = map.remove(&(tenant.to_owned(), key.to_owned()));
        self.any.store(!map.is_empty(), Ordering::SeqCst);
        taken
    }

    /// Whether an outcome of `key` is kept here (no lock is taken when none is).
    pub(super) fn holds(&self, tenant: &str, key: &str) -> bool {
        self.any.load(Ordering::SeqCst)
            && self
                .map()
                .contains_key(&(tenant.to_owned(), key.to_owned()))
    }

    fn keys(&self) -> Vec<(String, String)> {
        self.map().keys().cloned().collect()
    }
}

impl Dispatcher {
    /// Runs `op` on the store, tried again while the store cannot be reached, under the store
    /// policy and within what is left of `wait`; what the store met is noted in its reach.
    pub(super) async fn reaching<T, F, Fut>(
        &self,
        seed: u64,
        wait: &mut StoreWait,
        doing: &'static str,
        mut op: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let policy = self.inner.store_retry;
        let mut delays = Backoff::new(policy.base, policy.max, policy.jitter, seed);
        let mut tries = 1;
        loop {
            let done = wait.run(doing, op()).await;
            self.inner.reach.note(&done);
            let err = match done {
                Err(err) if err.is_unreachable() => err,
                done => return done,
            };
            let delay = delays.next().unwrap_or(policy.max);
            if tries >= policy.max_attempts || delay >= wait.left() {
                return Err(err);
            }
            tracing::warn!(error = %err, tries, "the operation store could not be reached; trying again");
            tokio::time::sleep(delay).await;
            wait.spend(delay);
            tries += 1;
        }
    }

    /// A fresh wait for the store, for an operation that may wait `budget` at most (a tool's
    /// deadline): the store wait, or `budget` when it is shorter.
    pub(super) fn store_wait(&self, budget: Duration) -> StoreWait {
        StoreWait::new(self.inner.store_wait.min(budget))
    }

    /// The claim of a write's key, tried again while the store cannot be reached. An outcome of
    /// the same key that this dispatcher kept is written first.
    pub(super) async fn claim_reaching(
        &self,
        store: &dyn OperationStore,
        request: ClaimRequest<'_>,
        seed: u64,
        wait: &mut StoreWait,
    ) -> Result<Claim, ToolError> {
        self.write_kept_first(store, request.tenant, request.key)
            .await;
        self.reaching(seed, wait, "claim a key", || {
            let mut request = request;
            request.now_ms = self.inner.clock.now_ms();
            store.claim(request)
        })
        .await
        .map_err(|err| self.claim_failed(&request, &err))
    }

    /// Writes the outcome of `key` that this dispatcher kept, if it kept one, before a claim of
    /// the key. Best effort: while the store is down the claim says so.
    pub(super) async fn write_kept_first(
        &self,
        store: &dyn OperationStore,
        tenant: &str,
        key: &str,
    ) {
        if self.inner.unrecorded.holds(tenant, key) {
            let _ = self.record_kept(store, tenant, key).await;
        }
    }

    /// What a write answers when the store failed its claim.
    pub(super) fn claim_failed(&self, request: &ClaimRequest<'_>, err: &StoreError) -> ToolError {
        tracing::warn!(error = %err, tool = request.tool, "the operation store failed; the call ran nothing");
        if self.inner.unrecorded.holds(request.tenant, request.key) {
            // This process ran the operation and keeps its outcome: say so, never that nothing
            // ran.
            return answers::kept_unrecorded(request.tool);
        }
        answers::store_failed(request.tool, err)
    }

    /// Records `outcome` under the write's claim, tried again while the store cannot be reached,
    /// with the call's audit record `audit` when one is given (a success, in one transaction:
    /// answers whether the record was written). When it does not land, the outcome is kept to be
    /// written later (see the module docs), and the audit record is the caller's to append.
    pub(super) async fn record_outcome(
        &self,
        claim: &HeldClaim<'_>,
        outcome: Outcome,
        audit: Option<&AuditEntry>,
        seed: u64,
        budget: Duration,
    ) -> Result<bool, StoreError> {
        let HeldClaim { store, owner, .. } = *claim;
        let mut wait = self.store_wait(budget);
        let written = self
            .reaching(seed, &mut wait, "record an outcome", || {
                write(store, owner, &outcome, audit, self.now_ms())
            })
            .await;
        match &written {
            Ok(_) | Err(StoreError::LostClaim { .. }) => {}
            Err(err) => {
                tracing::warn!(error = %err, key = %owner.key, "the outcome of a write could not be recorded; it is kept to be written when the store answers");
                self.inner.unrecorded.keep(owner, outcome);
            }
        }
        written
    }

    /// Writes the kept outcome of `key`, if any. Kept again when the store still fails.
    async fn record_kept(
        &self,
        store: &dyn OperationStore,
        tenant: &str,
        key: &str,
    ) -> Result<(), StoreError> {
        let Some(kept) = self.inner.unrecorded.take(tenant, key) else {
            return Ok(());
        };
        let now = self.now_ms();
        match write(store, &kept.owner, &kept.outcome, None, now).await {
            Ok(_) => Ok(()),
            Err(StoreError::LostClaim { .. }) => settle_expired(store, &kept, now).await,
            Err(err) => {
                self.inner.unrecorded.keep(&kept.owner, kept.outcome);
                Err(err)
            }
        }
    }

    /// Writes every outcome this dispatcher ran and could not record (see the module docs),
    /// then the audit records it kept while the store could not be reached
    /// ([`KEPT_AUDIT_RECORDS`](crate::dispatch::KEPT_AUDIT_RECORDS)) and those of reads that wait
    /// ([`flush_audit`](Self::flush_audit)); answers how many outcomes are still
    /// kept because the store failed again. The [`Reconciler`](crate::reconcile::Reconciler) calls it at
    /// the start of each pass.
    pub async fn record_unrecorded(&self) -> usize {
        let Some(store) = self.inner.store.as_deref() else {
            return 0;
        };
        let mut still = 0;
        for (tenant, key) in self.inner.unrecorded.keys() {
            if self.record_kept(store, &tenant, &key).await.is_err() {
                still += 1;
            }
        }
        self.write_kept_audit().await;
        self.flush_audit().await;
        still
    }

    /// Whether this dispatcher ran the operation of `key` and keeps its outcome unrecorded.
    pub(super) fn holds_unrecorded(&self, tenant: &str, key: &str) -> bool {
        self.inner.unrecorded.holds(tenant, key)
    }
}

/// The one store write that records `outcome`, with the call's audit record `audit` for a
/// success: answers whether that record was written.
async fn write(
    store: &dyn OperationStore,
    owner: &ClaimToken,
    outcome: &Outcome,
    audit: Option<&AuditEntry>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    match (outcome, audit) {
        (Outcome::Succeeded(result), audit) => store
            .succeed(Success {
                owner,
                result,
                now_ms,
                audit,
            })
            .await
            .map(|seq| seq.is_some()),
        (Outcome::Failed(error), _) => store
            .fail(AttemptFailure {
                owner,
                error,
                now_ms,
            })
            .await
            .map(|()| false),
        (Outcome::Unknown(error), _) => store
            .mark_unknown(AttemptFailure {
                owner,
                error,
                now_ms,
            })
            .await
            .map(|()| false),
    }
}

/// A kept outcome whose claim was lost: if its lease expired into `outcome_unknown` under the
/// same attempt, what this dispatcher knows settles it; otherwise another worker owns the
/// operation now, and the kept outcome is dropped.
async fn settle_expired(
    store: &dyn OperationStore,
    kept: &Unrecorded,
    now_ms: i64,
) -> Result<(), StoreError> {
    let resolution = match &kept.outcome {
        Outcome::Succeeded(result) => Resolution::Applied(result),
        Outcome::Failed(_) => Resolution::NotApplied,
        Outcome::Unknown(_) => return Ok(()),
    };
    let owner = &kept.owner;
    let Some(record) = store.get(&owner.tenant, &owner.key).await? else {
        return Ok(());
    };
    if record.state == OperationState::OutcomeUnknown && record.attempt == owner.attempt {
        store
            .resolve(ResolveRequest {
                tenant: &owner.tenant,
                key: &owner.key,
                resolution,
                now_ms,
            })
            .await?;
    }
    Ok(())
}
