//! The turn of a lone write begun by its claim: in a run counted in the store, a turn of one
//! write whose first request to the store is its claim (no business check, no rate limit, no
//! outbox) asks the store once for both, where the store does both in one transaction
//! ([`RunLedger::claims_with_turn`]): two commits a write call (the claim, the outcome),
//! not three.
//!
//! The turn's grant means what it means for any turn: an aborted run or the step limit stops
//! the turn before the write runs (the write is `NotStarted`, the run aborted); the call limit,
//! a spent retry budget and a repeated call are the write's answer. When the store cannot be
//! reached, the session counts the turn, as it does for any turn, and the write answers what a
//! claim that cannot reach the store answers.

use crate::auth::Session;
use crate::call::CallReport;
use crate::error::{ErrorKind, ToolError};
use crate::fate::TurnAborted;
use crate::store::{Claim, ClaimRequest, OperationStore, TurnClaim, TurnGrant, grant_lets_claim};

use super::ledger::{Ledger, step_limit_reached};
use super::plan::{Planned, Step};
use super::reach::StoreWait;
use super::turn_end::{aborted, reports};
use super::turn_shared::{Refusal, Shared, TurnAtClaim};
use super::{Dispatcher, answers};

impl Dispatcher {
    /// Runs a turn whose lone write's claim begins it, and ends it as any turn that ran ends:
    /// its reports, or the abort. A turn the store refused stops the run: a run aborted earlier
    /// reports no call (as a turn refused before its calls run does not), the step limit aborts
    /// the run with the write `NotStarted`.
    pub(super) async fn turn_begun_at_claim(
        &self,
        session: &Session,
        planned: Vec<Planned>,
        shared: Shared,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        let ended = self.run_unit(session, planned, &shared).await;
        let ended = self.settle_owed(session, ended).await;
        let refusal = shared
            .turn_at_claim
            .as_deref()
            .and_then(TurnAtClaim::refusal);
        let reason = match refusal {
            Some(Refusal::Aborted(record)) => {
                // As a turn of a run aborted earlier: no call reported.
                let reason = session.abort(record);
                return Err(aborted(reason, Vec::new()));
            }
            Some(Refusal::StepLimit(max_steps)) => {
                self.ledger(session)
                    .abort(step_limit_reached(max_steps))
                    .await
            }
            None if shared.signal.is_fired() => session
                .aborted()
                .cloned()
                .expect("the signal is raised after the session is aborted"),
            None => return Ok(reports(ended)),
        };
        Err(aborted(reason, ended))
    }

    /// Whether `call`, the one call of its turn, begins the turn with its claim: a write whose
    /// first request to the store is its claim, in a run whose counters ask a store that does
    /// both in one transaction.
    pub(super) fn begins_turn_at_claim(&self, call: &Planned, ledger: &Ledger<'_>) -> bool {
        let Step::Write(write) = &call.step else {
            return false;
        };
        let Some(store) = self.inner.store.as_deref() else {
            return false;
        };
        let descriptor = self.registered(write.tool).descriptor();
        descriptor.check.is_none()
            && descriptor.rate_limit.is_none()
            && descriptor.delivery != crate::tool::Delivery::Outbox
            && store.claims_with_turn()
            && ledger.asks_store()
    }

    /// The claim of a lone write that begins its turn: tried again while the store cannot be
    /// reached, as [`claim_reaching`](Self::claim_reaching) is. `Err` is the write's answer;
    /// for a turn the store refused (an aborted run, the step limit), the refusal is noted on
    /// `turn` too.
    pub(super) async fn claim_with_turn(
        &self,
        store: &dyn OperationStore,
        ledger: &Ledger<'_>,
        turn: &TurnAtClaim,
        request: ClaimRequest<'_>,
        seed: u64,
        wait: &mut StoreWait,
    ) -> Result<Claim, ToolError> {
        self.write_kept_first(store, request.tenant, request.key)
            .await;
        let tools = [(request.tool, 1)];
        let answered = self
            .reaching(seed, wait, "claim a key", || {
                let now_ms = self.inner.clock.now_ms();
                let mut request = request;
                request.now_ms = now_ms;
                store.begin_turn_and_claim(ledger.turn_request(&tools, now_ms), request)
            })
            .await;
        match answered {
            Ok(TurnClaim { grant, claim }) => {
                ledger.mirror_turn(&ledger.turn_request(&tools, request.now_ms), &grant);
                match claim {
                    Some(claim) => Ok(claim),
                    None => Err(self.turn_refused(ledger, turn, grant, &request)),
                }
            }
            Err(err) => {
                // As for any turn whose counters the store did not answer: the session counts it.
                let grant = ledger.begin_turn_locally(&ledger.turn_request(&tools, self.now_ms()));
                if !grant_lets_claim(&grant, &request) {
                    return Err(self.turn_refused(ledger, turn, grant, &request));
                }
                Err(self.claim_failed(&request, &err))
            }
        }
    }

    /// The write's answer to a turn whose grant did not let it claim.
    fn turn_refused(
        &self,
        ledger: &Ledger<'_>,
        turn: &TurnAtClaim,
        grant: TurnGrant,
        request: &ClaimRequest<'_>,
    ) -> ToolError {
        let refusal = match grant {
            TurnGrant::Aborted(record) => Refusal::Aborted(record),
            TurnGrant::StepLimit { max_steps } => Refusal::StepLimit(max_steps),
            TurnGrant::CallLimit {
                used,
                max_tool_calls,
            } => return answers::call_budget_spent(used, max_tool_calls, 1),
            TurnGrant::Admitted(admission) => {
                return if admission
                    .granted
                    .first()
                    .is_some_and(|granted| *granted >= 1)
                {
                    answers::repeated_call(request.tool)
                } else {
                    let budget = ledger.limits.retry_budget.unwrap_or(u32::MAX);
                    answers::retry_budget_spent(request.tool, budget)
                };
            }
        };
        turn.refuse(refusal);
        // Never read: the step sees the refusal and ends the turn.
        ToolError::new(ErrorKind::Internal, "the store refused the turn")
    }
}
