//! The write path of a write or destructive call: the operation's key claimed in the store (a
//! duplicate answers the stored outcome), the attempts run under the claim, and the outcome
//! recorded, or kept until the store can take it.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use serde_json::Value;

use crate::auth::Session;
use crate::backoff::seed_of;
use crate::ctx::Ctx;
use crate::delivery::Delivery;
use crate::error::ToolError;
#[cfg(feature = "test-util")]
use crate::failpoint::Failpoint;
use crate::idempotency::UnkeyedRequest;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::retry::RetryPolicy;
use crate::steps::StepJournal;
use crate::store::{
    ApprovalRecord, Claim, ClaimRequest, ClaimToken, ClaimedRejection, OperationState,
    OperationStore,
};

use super::held_claim::HeldClaim;
use super::ledger::Ledger;
use super::plan::PreparedWrite;
use super::reach::StoreWait;
use super::recorded::{CLAIM_ROUNDS, Recorded};
use super::under_claim::UnderClaim;
use super::{Dispatcher, answers, approval, audit};

impl Dispatcher {
    /// A write: claim the operation's key, run it (with retries while the fault proves nothing
    /// was applied), record the outcome. A duplicate answers the stored outcome, marked as a
    /// replay.
    pub(super) async fn write(
        &self,
        session: &Session,
        call_id: &str,
        registered: &RegisteredTool,
        write: PreparedWrite,
        ledger: &Ledger<'_>,
    ) -> Result<CallResult, ToolError> {
        let descriptor = registered.descriptor();
        let Some(store) = self.inner.store.as_deref() else {
            return Err(answers::no_store(descriptor.name));
        };
        let tenant = session.auth().tenant();
        // Over the rate limit, a write is refused before it claims its key.
        self.inner.rate_limits.check(descriptor, tenant)?;
        let ctx = self
            .ctx(session, call_id, registered)
            .with_idempotency_key(write.key.clone());
        // The store's faults are retried within the tool's deadline and the call's store wait,
        // of which the turn's counters may have spent some (see `reach`).
        let budget = self.timeout_of(registered);
        let mut wait = self.store_wait(budget);
        wait.spend(ledger.store_waited());
        self.check_before_claim(store, registered, &ctx, &write, &mut wait)
            .await?;
        let approval = self.approval_request(&ctx, registered, &write);
        // The record keeps the arguments for the reconcile hook and the runner of approved
        // operations, but never a sensitive one.
        let redacted =
            (!descriptor.sensitive.is_empty()).then(|| approval::redacted(descriptor, &write.args));
        let call = WriteCall {
            store,
            registered,
            tenant,
            key: &write.key,
            hash: &write.hash,
            canonical: &write.canonical,
            stored: redacted.as_deref().unwrap_or(&write.canonical),
            args: &write.args,
            approval: approval.as_ref(),
            lease: self.lease(registered, RetryPolicy::of(descriptor)),
            seed: self.inner.seed ^ seed_of(call_id),
            wait,
            // A duplicate waits for the outcome of the call it found running until then.
            give_up: tokio::time::Instant::now() + self.inner.in_progress_wait,
        };
        if descriptor.delivery == Delivery::Outbox {
            return self.write_outbox(&call, ctx).await;
        }
        match self.claim_to_run(&call, ledger, &mut wait).await {
            Claimed::Run { attempt, approved } => {
                self.run_claimed(&call, ctx, attempt, approved, ledger, budget)
                    .await
            }
            Claimed::Answer(answer) => answer,
            Claimed::Again => Err(answers::claims_exhausted(descriptor.name)),
        }
    }

    /// The business check, when the tool has one, before the claim: a refusal stores nothing
    /// and sends nothing. A call whose key already holds its request is answered from the
    /// record instead (a replay is never refused because the state it changed no longer passes
    /// the check).
    async fn check_before_claim(
        &self,
        store: &dyn OperationStore,
        registered: &RegisteredTool,
        ctx: &Ctx,
        write: &PreparedWrite,
        wait: &mut StoreWait,
    ) -> Result<(), ToolError> {
        let tenant = ctx.auth().tenant();
        if registered.descriptor().check.is_some()
            && self.claim_may_act(store, tenant, write, wait).await
        {
            self.check(registered, ctx, &write.args).await?;
        }
        Ok(())
    }

    /// Claims `call`'s key until the store's answer is to run it ([`Claimed::Run`]) or to
    /// answer without running ([`Claimed::Answer`]); never [`Claimed::Again`]: a key claimed
    /// again too often is answered `claims_exhausted`.
    async fn claim_to_run(
        &self,
        call: &WriteCall<'_>,
        ledger: &Ledger<'_>,
        wait: &mut StoreWait,
    ) -> Claimed {
        let (store, seed) = (call.store, call.seed);
        let mut rounds = 0;
        loop {
            let request = call.request(self.now_ms());
            let claim = match ledger.take_turn_at_claim() {
                // The first claim of a lone write begins its turn (see `turn_claim`).
                Some(turn) => {
                    self.claim_with_turn(store, ledger, turn, request, seed, wait)
                        .await
                }
                None => self.claim_reaching(store, request, seed, wait).await,
            };
            let claim = match claim {
                Ok(claim) => claim,
                Err(err) => return Claimed::Answer(Err(err)),
            };
            match self.on_claim(call, claim).await {
                // The call waited on failed, or its record was purged: claim the key again.
                Claimed::Again if rounds < CLAIM_ROUNDS => rounds += 1,
                Claimed::Again => {
                    let tool = call.registered.descriptor().name;
                    return Claimed::Answer(Err(answers::claims_exhausted(tool)));
                }
                run_or_answer => return run_or_answer,
            }
        }
    }

    /// A write that claimed its key, as attempt `attempt` of the operation: the approval it
    /// runs under checked again, its attempts run with their steps journaled under the claim
    /// (a retry or a takeover skips those done), its outcome recorded.
    async fn run_claimed(
        &self,
        call: &WriteCall<'_>,
        ctx: Ctx,
        attempt: u32,
        approved: Option<Box<ApprovalRecord>>,
        ledger: &Ledger<'_>,
        budget: Duration,
    ) -> Result<CallResult, ToolError> {
        let tool = call.registered.descriptor().name;
        let owner = ClaimToken {
            tenant: call.tenant.to_owned(),
            key: call.key.to_owned(),
            attempt,
        };
        if let Some(approved) = approved {
            audit::note_approval(&approved.id);
            let revalidated = self.revalidate(call.registered, &approved, call.args, &ctx);
            if let Err(reason) = revalidated.await {
                return self.reject_approved(call.store, &owner, tool, reason).await;
            }
        }
        let journal = self.inner.store.as_ref().map(|store| {
            Arc::new(StepJournal::new(
                store.clone(),
                owner.clone(),
                self.inner.clock.clone(),
            ))
        });
        let ctx = match &journal {
            Some(journal) => ctx.with_journal(journal.clone()),
            None => ctx,
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Claimed);
        let under = UnderClaim {
            dispatcher: self,
            claim: HeldClaim {
                store: call.store,
                owner: &owner,
                lease: call.lease,
                attempt: AtomicU32::new(1),
            },
            tool,
            seed: call.seed,
            budget,
        };
        let outcome = under
            .attempts(call.registered, &ctx, call.args, ledger)
            .await;
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Executed);
        let steps = journal.map(|journal| journal.reports()).unwrap_or_default();
        let result = under.settle(outcome, steps).await;
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Recorded);
        result
    }

    /// What a write does with the store's answer to its claim (of the plain path or the
    /// outbox's): run, answer, or claim again.
    pub(super) async fn on_claim(&self, call: &WriteCall<'_>, claim: Claim) -> Claimed {
        let descriptor = call.registered.descriptor();
        match claim {
            Claim::Acquired { attempt, approved } => Claimed::Run {
                attempt,
                approved: approved.map(Box::new),
            },
            Claim::Conflict { .. } => Claimed::Answer(Err(answers::conflict(descriptor))),
            Claim::Approval(found) => {
                // Asked by this call, or found from an earlier one.
                let asked_now = call.approval.is_some_and(|mine| mine.id == found.id);
                audit::note_approval(&found.id);
                Claimed::Answer(Ok(approval::approval_answer(&found, !asked_now)))
            }
            Claim::Existing(record) => {
                match self.answer_recorded(call.store, record, call.give_up).await {
                    Recorded::Answer(answer) => Claimed::Answer(answer),
                    Recorded::Claimable => Claimed::Again,
                }
            }
        }
    }

    /// An approved operation that failed the checks before it ran: rejected, with `reason`, in
    /// the store and the audit trail; the model reads the rejection.
    pub(super) async fn reject_approved(
        &self,
        store: &dyn OperationStore,
        owner: &ClaimToken,
        tool: &str,
        reason: String,
    ) -> Result<CallResult, ToolError> {
        let now_ms = self.now_ms();
        let decision = approval::revalidation_rejected(reason, now_ms);
        match store
            .reject_claimed(ClaimedRejection {
                owner,
                decision: &decision,
                now_ms,
            })
            .await
        {
            Ok(rejected) => {
                let entry = crate::decide::decision_entry(&rejected, &decision);
                if let Err(err) = store.append_audit(&entry).await {
                    tracing::warn!(error = %err, tool, "a rejection could not be added to the audit trail");
                }
                Ok(approval::approval_answer(&rejected, false))
            }
            Err(err) => {
                tracing::warn!(error = %err, tool, "an approved operation failed its checks and its rejection could not be recorded");
                Err(answers::store_failed(tool, &err))
            }
        }
    }

    /// Tells the test hooks, if any, that a write reached `point`.
    #[cfg(feature = "test-util")]
    pub(super) fn reached(&self, point: Failpoint) {
        if let Some(failpoints) = &self.inner.failpoints {
            failpoints.hit(point);
        }
    }

    /// How long a claim holds: every attempt's deadline and every backoff, plus a margin.
    fn lease(&self, registered: &RegisteredTool, policy: RetryPolicy) -> Duration {
        self.timeout_of(registered)
            .saturating_mul(policy.max_attempts)
            .saturating_add(policy.max.saturating_mul(policy.max_attempts - 1))
            .saturating_add(LEASE_MARGIN)
    }
}

/// What a write does with the store's answer to its claim.
pub(super) enum Claimed {
    /// Run it under the claim: the attempt claimed, and the approval it runs under.
    Run {
        attempt: u32,
        approved: Option<Box<ApprovalRecord>>,
    },
    /// Answer this without running.
    Answer(Result<CallResult, ToolError>),
    /// Claim the key again: the record failed, or was purged, while it waited.
    Again,
}

/// A write on its way to its claim: what the plain path and the outbox's share.
pub(super) struct WriteCall<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) registered: &'a RegisteredTool,
    pub(super) tenant: &'a str,
    pub(super) key: &'a str,
    pub(super) hash: &'a str,
    /// The canonical arguments, none redacted: a record stored under their unkeyed hash
    /// (before hashes were keyed) is recognised by them.
    pub(super) canonical: &'a str,
    /// The arguments the record keeps (sensitive ones redacted).
    pub(super) stored: &'a str,
    /// The validated arguments the tool runs with.
    pub(super) args: &'a Value,
    /// The approval this call asks for, over its tool's threshold.
    pub(super) approval: Option<&'a ApprovalRecord>,
    pub(super) lease: Duration,
    pub(super) seed: u64,
    /// What is left of the call's wait for a store that cannot be reached, for its claim.
    pub(super) wait: StoreWait,
    /// Until when a duplicate waits for the outcome of the call it found running.
    pub(super) give_up: tokio::time::Instant,
}

impl WriteCall<'_> {
    /// The claim of its key at `now_ms`.
    pub(super) fn request(&self, now_ms: i64) -> ClaimRequest<'_> {
        let descriptor = self.registered.descriptor();
        ClaimRequest {
            tenant: self.tenant,
            key: self.key,
            tool: descriptor.name,
            request_hash: self.hash,
            unkeyed: Some(UnkeyedRequest::new(descriptor.name, self.canonical)),
            arguments: self.stored,
            now_ms,
            lease: self.lease,
            takeover: descriptor.honours_key,
            approval: self.approval,
        }
    }
}

impl Dispatcher {
    /// Whether a claim of `write` may run it or ask for its approval: its key holds no record,
    /// or a record a new request takes over (`failed`, or `rejected` under other arguments). A
    /// store that cannot answer (or is known to be out of reach) counts as yes: the check runs,
    /// and the claim meets the store's fault.
    async fn claim_may_act(
        &self,
        store: &dyn OperationStore,
        tenant: &str,
        write: &PreparedWrite,
        wait: &mut StoreWait,
    ) -> bool {
        if self.inner.reach.is_down() {
            return true;
        }
        let found = wait
            .run("read a record", store.get(tenant, &write.key))
            .await;
        self.inner.reach.note(&found);
        match found {
            Ok(Some(record)) => match record.state {
                OperationState::Failed => true,
                OperationState::Rejected => {
                    record.request_hash != write.hash
                        && !UnkeyedRequest::new(write.tool, &write.canonical)
                            .matches(&record.request_hash)
                }
                _ => false,
            },
            Ok(None) | Err(_) => true,
        }
    }
}

/// Added to a claim's lease beyond its attempts and backoffs.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
