//! [`RunLedger`]: the counters of an agent's run, its turns and its abort.

use async_trait::async_trait;

#[cfg(doc)]
use super::ApprovalRecord;
use super::{
    AbortReport, AbortRequest, AttemptCharge, ClaimRequest, ClaimStore, FailureNote, RunKey,
    RunRecord, StoreError, TurnClaim, TurnGrant, TurnRequest, begin_turn_then_claim,
};

/// The ledger of an agent's runs: one record a `(tenant, run)` counting its steps, tool calls
/// and attempts, with its failed calls and its abort.
///
/// An application reads a run with [`run`](Self::run). The rest only a store implements, and
/// the dispatcher calls: as each turn and retry is counted, and when a run is aborted (the
/// dispatcher stores the abort with [`abort_run`](Self::abort_run)).
#[async_trait]
pub trait RunLedger: ClaimStore {
    /// Starts a model turn of `request.run`, atomically, creating the run's record if it has
    /// none (see [`RunRecord::begin_turn`], which every store follows):
    ///
    /// - an aborted run: [`TurnGrant::Aborted`], nothing counted;
    /// - `steps >= max_steps`: [`TurnGrant::StepLimit`], nothing counted;
    /// - otherwise the turn counts as a step; then, when `tool_calls` plus the turn's calls
    ///   would pass `max_tool_calls`: [`TurnGrant::CallLimit`], no call counted;
    /// - otherwise every call is counted, each tool is granted as many of its calls as its
    ///   retry budget has attempts left (those grants are added to its attempts), and the answer
    ///   lists the run's failed calls of the requested tools: [`TurnGrant::Admitted`].
    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError>;

    /// Begins the turn `turn` of one write and, when its grant lets the write claim its key
    /// ([`grant_lets_claim`](super::grant_lets_claim)), claims it with `claim` as
    /// [`claim`](ClaimStore::claim) does: the turn of a lone write, whose first statement to
    /// the store is its claim. `turn` asks for one call of `claim.tool`, in `claim.tenant`'s
    /// run.
    ///
    /// A store that can do both in one transaction should (the PostgreSQL store does, in one
    /// statement, for a claim that asks for no approval): the turn of a write then costs the
    /// store two commits, the claim and the outcome. The default begins the turn, then claims
    /// ([`begin_turn_then_claim`]): two transactions, and a turn counted whose claim failed
    /// (which is what the dispatcher counts when a claim fails after its turn, too).
    async fn begin_turn_and_claim(
        &self,
        turn: TurnRequest<'_>,
        claim: ClaimRequest<'_>,
    ) -> Result<TurnClaim, StoreError> {
        begin_turn_then_claim(self, turn, claim).await
    }

    /// Whether [`begin_turn_and_claim`](Self::begin_turn_and_claim) costs this store less than
    /// [`begin_turn`](Self::begin_turn) and then [`claim`](ClaimStore::claim) (one transaction,
    /// not two): the dispatcher then begins the turn of a lone write with its claim. The
    /// default, `false`: the dispatcher begins every turn before its calls run.
    fn claims_with_turn(&self) -> bool {
        false
    }

    /// One more attempt of `charge.tool` in `charge.run` (a retry below the model), atomically:
    /// `false`, and nothing counted, when its attempts have reached `charge.retry_budget`.
    async fn charge_attempt(&self, charge: AttemptCharge<'_>) -> Result<bool, StoreError>;

    /// Notes that a call of `failure.tool` with the request hash `failure.request_hash` failed
    /// in `failure.run` (noting it again adds nothing; either way the run's `updated_ms` becomes
    /// `failure.now_ms`).
    async fn note_failure(&self, failure: FailureNote<'_>) -> Result<(), StoreError>;

    /// Aborts `request.run` with `request.abort`: the first abort stands. In the same transaction, every approval of the
    /// run that [`ApprovalRecord::falls_with_its_run`] (pending, or approved with its operation
    /// still `awaiting_approval` under it) is rejected with [`ApprovalRecord::run_aborted`] at
    /// `request.now_ms`, its operation `rejected`; this is done at every call, so an abort stored again
    /// also rejects an approval asked since. Answers the abort that stands and the approvals
    /// rejected now ([`AbortReport`]).
    async fn abort_run(&self, request: AbortRequest<'_>) -> Result<AbortReport, StoreError>;

    /// The record of `run`, if it has one.
    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError>;
}
