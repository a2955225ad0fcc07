//! The answer to a claim that found a record of the same request under its key: the stored
//! outcome as a replay, or, while the record is `processing`, a bounded wait and then the words
//! that cover what is known (see `outage` for an operation this dispatcher ran and could not
//! record).

use std::time::Duration;

use crate::delivery::Delivery;
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::result::{CallResult, Status};
use crate::store::{OperationRecord, OperationState, OperationStore, StoreError};

use super::{Dispatcher, answers, delivery_notes, partial};

impl Dispatcher {
    /// What a call whose key holds `record`, of the same request, answers: the stored outcome,
    /// after waiting until `give_up` for one that is still running; or that the key may be
    /// claimed again (the call waited on failed, or its record was purged meanwhile).
    pub(super) async fn answer_recorded(
        &self,
        store: &dyn OperationStore,
        record: OperationRecord,
        give_up: tokio::time::Instant,
    ) -> Recorded {
        if record.state == OperationState::Processing
            && self.holds_unrecorded(&record.tenant, &record.key)
        {
            // This dispatcher ran it and holds its outcome: nothing is running.
            return Recorded::Answer(Ok(CallResult::from_error(&answers::kept_unrecorded(
                &record.tool,
            ))));
        }
        let record = match settled(store, record, give_up).await {
            Ok(record) => record,
            Err(next) => return next,
        };
        match self.stored_answer(store, &record).await {
            Ok(mut result) => {
                result.replayed = record.state != OperationState::Processing;
                Recorded::Answer(Ok(result))
            }
            Err(next) => next,
        }
    }

    /// What a call answers from `record`, settled or still `processing` after its wait (not
    /// marked a replay yet); or what it does instead: answer an error, or claim the key again.
    async fn stored_answer(
        &self,
        store: &dyn OperationStore,
        record: &OperationRecord,
    ) -> Result<CallResult, Recorded> {
        let error = |err| Err(Recorded::Answer(Err(err)));
        match record.state {
            OperationState::Succeeded => self
                .stored_success(store, record)
                .await
                .map_err(|err| Recorded::Answer(Err(err))),
            OperationState::Queued => self
                .stored_queued(store, record)
                .await
                .map_err(|err| Recorded::Answer(Err(err))),
            OperationState::Partial => {
                match record.result.as_deref().and_then(partial::read_report) {
                    Some(steps) => Ok(partial::answer(&record.tool, steps, true)),
                    None => error(answers::stored_result_unreadable(&record.tool)),
                }
            }
            OperationState::OutcomeUnknown => Ok(CallResult::from_error(
                &answers::unknown_replayed(&record.tool),
            )),
            OperationState::Processing => Ok(CallResult::from_error(&answers::held_elsewhere(
                &record.tool,
            ))),
            // Definitely not applied: the key is free to claim again, by this request or another.
            OperationState::Failed => Err(Recorded::Claimable),
            // An approval's record without its approval (a store that lost it): never run it.
            OperationState::AwaitingApproval | OperationState::Rejected => {
                error(answers::approval_missing(&record.tool))
            }
        }
    }

    /// The stored success of `record`; for an outbox tool, with its delivery (the provider's
    /// answer goes with the tool's result).
    async fn stored_success(
        &self,
        store: &dyn OperationStore,
        record: &OperationRecord,
    ) -> Result<CallResult, ToolError> {
        let data = stored_data(record)?;
        if !self.is_outbox(&record.tool) {
            return Ok(CallResult::succeeded(data));
        }
        match store.event(&record.tenant, &record.key).await {
            Ok(Some(event)) => Ok(delivery_notes::of_event(Status::Succeeded, data, &event)),
            // Its body enqueued nothing: its rows were the whole effect.
            Ok(None) => Ok(CallResult::succeeded(data)),
            Err(err) => Err(self.event_unread(record, &err)),
        }
    }

    /// The stored result of a `queued` outbox operation, with where its delivery stands.
    async fn stored_queued(
        &self,
        store: &dyn OperationStore,
        record: &OperationRecord,
    ) -> Result<CallResult, ToolError> {
        let data = stored_data(record)?;
        match store.event(&record.tenant, &record.key).await {
            Ok(Some(event)) => Ok(delivery_notes::of_event(Status::Queued, data, &event)),
            Ok(None) => Err(answers::event_missing(&record.tool)),
            Err(err) => Err(self.event_unread(record, &err)),
        }
    }

    /// Whether `tool` delivers through the outbox.
    fn is_outbox(&self, tool: &str) -> bool {
        self.inner
            .registry
            .get(tool)
            .is_some_and(|registered| registered.descriptor().delivery == Delivery::Outbox)
    }

    /// The answer when the event of `record` could not be read.
    fn event_unread(&self, record: &OperationRecord, err: &StoreError) -> ToolError {
        tracing::warn!(error = %err, tool = record.tool.as_str(), "the outbox event of an operation could not be read");
        answers::store_failed(&record.tool, err)
    }
}

/// `record`, read again while it is `processing` until it is not or `give_up` comes, after
/// waits that double from 20 ms to 500 ms; or what the call does when the record was purged
/// meanwhile (claims the key again) or could not be read (answers the store's failure).
async fn settled(
    store: &dyn OperationStore,
    mut record: OperationRecord,
    give_up: tokio::time::Instant,
) -> Result<OperationRecord, Recorded> {
    let mut poll = Duration::from_millis(20);
    while record.state == OperationState::Processing && tokio::time::Instant::now() < give_up {
        tokio::time::sleep(poll.min(give_up - tokio::time::Instant::now())).await;
        poll = (poll * 2).min(Duration::from_millis(500));
        match store.get(&record.tenant, &record.key).await {
            Ok(Some(latest)) => record = latest,
            Ok(None) => return Err(Recorded::Claimable),
            Err(err) => {
                tracing::warn!(error = %err, tool = record.tool.as_str(), "the operation store failed; the call did not run");
                return Err(Recorded::Answer(Err(answers::store_failed(
                    &record.tool,
                    &err,
                ))));
            }
        }
    }
    Ok(record)
}

/// The tool's result the record holds, as the model reads it.
fn stored_data(record: &OperationRecord) -> Result<JsonText, ToolError> {
    record
        .result
        .as_deref()
        .map(JsonText::parse)
        .transpose()
        .ok()
        .flatten()
        .ok_or_else(|| answers::stored_result_unreadable(&record.tool))
}

/// What a call whose key holds a record of the same request does next.
pub(super) enum Recorded {
    /// It answers this.
    Answer(Result<CallResult, ToolError>),
    /// It claims the key again: the record failed, or was purged, while it waited.
    Claimable,
}

/// How many times a call claims its key again after the record it waited on failed or was
/// purged. Each round follows another call's failure within the wait, so the bound is reached
/// only by a storm of failing duplicates, or by a store that answers a `failed` record instead
/// of claiming it.
pub(super) const CLAIM_ROUNDS: u32 = 4;
