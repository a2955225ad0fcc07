//! The write path of an outbox tool (`delivery = "outbox"`): its key claimed inside a
//! transaction the store opens, its body run once in that transaction (its only effects are
//! the application's rows and its one event), then everything committed together, or rolled
//! back so that nothing remains. The model reads `queued`: accepted, the provider has not acted.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;

use crate::ctx::Ctx;
use crate::error::ToolError;
#[cfg(feature = "test-util")]
use crate::failpoint::Failpoint;
use crate::json_text::JsonText;
use crate::outbox::OutboxSlot;
use crate::result::CallResult;
use crate::store::{ApprovalRecord, Begun, Claim, ClaimToken, Commit, NewEvent, StoreTransaction};

use super::attempt::{self, Input};
use super::recorded::CLAIM_ROUNDS;
use super::write::{Claimed, WriteCall};
use super::{Dispatcher, answers, audit, delivery_notes, unwind};

/// Where an outbox write's claim ended: open in a transaction, for its body to run in, or
/// answered without running.
#[expect(
    clippy::large_enum_variant,
    reason = "answered once and taken apart at once, as the store's `Begun` is"
)]
enum Opened {
    Run {
        tx: Box<dyn StoreTransaction>,
        attempt: u32,
        approved: Option<ApprovalRecord>,
    },
    Answer(Result<CallResult, ToolError>),
}

impl Dispatcher {
    /// An outbox write: claim in a transaction, run the body once in it, commit or roll back.
    pub(super) async fn write_outbox(
        &self,
        call: &WriteCall<'_>,
        ctx: Ctx,
    ) -> Result<CallResult, ToolError> {
        let (tx, attempt, approved) = match self.claim_in_transaction(call).await {
            Opened::Run {
                tx,
                attempt,
                approved,
            } => (tx, attempt, approved),
            Opened::Answer(answer) => return answer,
        };
        let owner = ClaimToken {
            tenant: call.tenant.to_owned(),
            key: call.key.to_owned(),
            attempt,
        };
        if let Some(approved) = approved {
            audit::note_approval(&approved.id);
            if let Err(reason) = self
                .revalidate(call.registered, &approved, call.args, &ctx)
                .await
            {
                return self.reject_outbox(call, tx, &approved, reason).await;
            }
        }
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Claimed);
        let slot = Arc::new(OutboxSlot::new(tx));
        let ctx = ctx.with_outbox(slot.clone());
        let outcome = self.run_body(call, &ctx).await;
        drop(ctx);
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Executed);
        let (tx, event) = slot.take().await;
        let Some(tx) = tx else {
            return Err(answers::no_transaction(call.registered.descriptor().name));
        };
        let result = match outcome {
            Ok(data) => self.commit_outbox(call, &owner, tx, data, event).await,
            Err(err) => {
                rollback(call.registered.descriptor().name, tx).await;
                Err(err)
            }
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Recorded);
        result
    }

    /// Claims `call`'s key inside a transaction the store opens, claiming again while the
    /// record it found says to (up to [`CLAIM_ROUNDS`] times).
    async fn claim_in_transaction(&self, call: &WriteCall<'_>) -> Opened {
        let tool = call.registered.descriptor().name;
        let mut rounds = 0;
        let mut wait = call.wait;
        loop {
            let begun = self
                .reaching(call.seed, &mut wait, "claim a key", || {
                    call.store.begin(call.request(self.now_ms()))
                })
                .await;
            let claim = match begun {
                Ok(Begun::Open {
                    tx,
                    attempt,
                    approved,
                }) => {
                    return Opened::Run {
                        tx,
                        attempt,
                        approved,
                    };
                }
                Ok(Begun::Settled(claim)) => claim,
                Err(err) => {
                    tracing::warn!(error = %err, tool, "the operation store failed; the call did not run");
                    return Opened::Answer(Err(answers::store_failed(tool, &err)));
                }
            };
            match self.on_claim(call, claim).await {
                Claimed::Run { .. } => {
                    // Acquired without a transaction: its body has nowhere to write its rows.
                    return Opened::Answer(Err(answers::no_transaction(tool)));
                }
                Claimed::Answer(answer) => return Opened::Answer(answer),
                Claimed::Again if rounds < CLAIM_ROUNDS => rounds += 1,
                Claimed::Again => return Opened::Answer(Err(answers::claims_exhausted(tool))),
            }
        }
    }

    /// The body of `call`, once, under its deadline: its only effects are rows in the
    /// transaction, and a retry would need another. A failure, a panic or a deadline passed is
    /// answered as rolled back.
    async fn run_body(&self, call: &WriteCall<'_>, ctx: &Ctx) -> Result<JsonText, ToolError> {
        let tool = call.registered.descriptor().name;
        let deadline = self.timeout_of(call.registered);
        audit::count_attempt(1);
        let body = AssertUnwindSafe(async {
            let run = Input::Tree(call.args).invoke(call.registered, ctx);
            attempt::attempt(call.registered, run, deadline).await
        });
        match body.catch_unwind().await {
            Ok(Ok(data)) => Ok(data),
            Ok(Err(err)) => Err(answers::rolled_back(tool, err, deadline)),
            Err(payload) => {
                unwind::trace(tool, &*payload);
                Err(answers::outbox_panicked(tool))
            }
        }
    }

    /// Commits `tx`: the record of `owner` with the body's `data`, its rows and its `event`
    /// together. The model reads `queued` when there is an event to deliver.
    async fn commit_outbox(
        &self,
        call: &WriteCall<'_>,
        owner: &ClaimToken,
        tx: Box<dyn StoreTransaction>,
        data: JsonText,
        event: Option<NewEvent>,
    ) -> Result<CallResult, ToolError> {
        let commit = Commit {
            owner,
            result: data.as_str(),
            event: event.as_ref(),
            now_ms: self.now_ms(),
        };
        match tx.commit(commit).await {
            Ok(()) if event.is_some() => Ok(delivery_notes::queued_now(call.key, data)),
            // No event: its rows were the whole effect, committed.
            Ok(()) => Ok(CallResult::succeeded(data)),
            Err(err) => {
                let tool = call.registered.descriptor().name;
                tracing::warn!(error = %err, tool, "the commit of an outbox operation failed");
                Err(answers::commit_unknown(tool, &err))
            }
        }
    }

    /// An approved outbox operation that failed the checks before it ran: its transaction is
    /// rolled back, then the plain claim takes the approved record and rejects it.
    async fn reject_outbox(
        &self,
        call: &WriteCall<'_>,
        tx: Box<dyn StoreTransaction>,
        approved: &ApprovalRecord,
        reason: String,
    ) -> Result<CallResult, ToolError> {
        let tool = call.registered.descriptor().name;
        rollback(tool, tx).await;
        let mut wait = call.wait;
        let claim = self
            .claim_reaching(
                call.store,
                call.request(self.now_ms()),
                call.seed,
                &mut wait,
            )
            .await?;
        match claim {
            Claim::Acquired { attempt, .. } => {
                let owner = ClaimToken {
                    tenant: call.tenant.to_owned(),
                    key: call.key.to_owned(),
                    attempt,
                };
                self.reject_approved(call.store, &owner, tool, reason).await
            }
            // Someone else took it meanwhile: answer what they left.
            other => match self.on_claim(call, other).await {
                Claimed::Answer(answer) => answer,
                Claimed::Run { .. } | Claimed::Again => {
                    tracing::warn!(approval = %approved.id, tool, "an approved outbox operation failed its checks and changed before it could be rejected");
                    Err(answers::claims_exhausted(tool))
                }
            },
        }
    }
}

/// Rolls `tx` back; a failure is traced (a transaction that does not commit leaves nothing).
async fn rollback(tool: &str, tx: Box<dyn StoreTransaction>) {
    if let Err(err) = tx.rollback().await {
        tracing::warn!(error = %err, tool, "an outbox transaction could not be rolled back; it ends without committing");
    }
}
