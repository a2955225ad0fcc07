//! A write's claim that begins its turn too
//! ([`RunLedger::begin_turn_and_claim`](super::RunLedger::begin_turn_and_claim)): the
//! turn of a lone write in a run counted in the store costs the store one transaction, not two.

use super::{Claim, ClaimRequest, RunLedger, StoreError, TurnGrant, TurnRequest};

/// What [`RunLedger::begin_turn_and_claim`](super::RunLedger::begin_turn_and_claim)
/// did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnClaim {
    /// The turn's grant, as [`RunLedger::begin_turn`](super::RunLedger::begin_turn)
    /// answers it.
    pub grant: TurnGrant,
    /// The claim of the write's key: `Some` exactly when [`grant_lets_claim`] says the grant
    /// lets the write claim it; `None` when nothing was claimed.
    pub claim: Option<Claim>,
}

/// Whether `grant` lets the write of `claim` claim its key: the turn was admitted, it granted
/// the write's tool at least one attempt (the write is the turn's first call of its tool), and
/// the write's request is not one of the run's calls that failed earlier (repeat detection).
///
/// ```
/// use toolgate::store::{Admission, FailedCall, TurnGrant, grant_lets_claim};
/// # use toolgate::store::ClaimRequest;
/// # let request = ClaimRequest {
/// #     tenant: "acme", key: "k1", tool: "refund", request_hash: "h1", unkeyed: None,
/// #     arguments: "{}", now_ms: 0, lease: std::time::Duration::from_secs(30), takeover: false,
/// #     approval: None,
/// # };
/// let admitted = |granted: u32, failed: Vec<FailedCall>| {
///     TurnGrant::Admitted(Admission { step: 1, granted: [granted].into(), failed })
/// };
/// assert!(grant_lets_claim(&admitted(1, vec![]), &request));
/// // The tool's retry budget is spent.
/// assert!(!grant_lets_claim(&admitted(0, vec![]), &request));
/// // The same request failed earlier in the run.
/// let failed = FailedCall { tool: "refund".into(), request_hash: "h1".into() };
/// assert!(!grant_lets_claim(&admitted(1, vec![failed]), &request));
/// assert!(!grant_lets_claim(&TurnGrant::StepLimit { max_steps: 50 }, &request));
/// ```
pub fn grant_lets_claim(grant: &TurnGrant, claim: &ClaimRequest<'_>) -> bool {
    match grant {
        TurnGrant::Admitted(admission) => {
            admission
                .granted
                .first()
                .is_some_and(|granted| *granted >= 1)
                && !admission.failed.iter().any(|failed| {
                    failed.tool == claim.tool && failed.request_hash == claim.request_hash
                })
        }
        TurnGrant::Aborted(_) | TurnGrant::StepLimit { .. } | TurnGrant::CallLimit { .. } => false,
    }
}

/// [`RunLedger::begin_turn_and_claim`] in two steps: `store` begins the turn, then claims
/// when the grant lets the write claim. The trait's default; a store that does both at once
/// falls back on it for a claim it cannot do that way.
pub async fn begin_turn_then_claim<S: RunLedger + ?Sized>(
    store: &S,
    turn: TurnRequest<'_>,
    claim: ClaimRequest<'_>,
) -> Result<TurnClaim, StoreError> {
    let grant = store.begin_turn(turn).await?;
    let claim = if grant_lets_claim(&grant, &claim) {
        Some(store.claim(claim).await?)
    } else {
        None
    };
    Ok(TurnClaim { grant, claim })
}
