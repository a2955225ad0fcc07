//! The answer to a claim that found a record under its key: the stored outcome as a replay,
//! a conflict, or, while the record is `processing`, a bounded wait and then the words that
//! cover what is known (see `outage` for an operation this dispatcher ran and could not record).

use std::time::Duration;

use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::result::CallResult;
use crate::store::{OperationRecord, OperationState, OperationStore};

use super::Dispatcher;
use super::outage::{held_elsewhere, kept_unrecorded, store_failed};

impl Dispatcher {
    /// The answer for a key that exists with the same request.
    pub(super) async fn existing(
        &self,
        store: &dyn OperationStore,
        record: OperationRecord,
    ) -> Result<CallResult, ToolError> {
        let mut record = record;
        if record.state == OperationState::Processing
            && self.holds_unrecorded(&record.tenant, &record.key)
        {
            // This dispatcher ran it and holds its outcome: nothing is running.
            return Ok(CallResult::from_error(&kept_unrecorded(&record.tool)));
        }
        let give_up = tokio::time::Instant::now() + self.inner.in_progress_wait;
        let mut poll = Duration::from_millis(20);
        while record.state == OperationState::Processing && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(poll.min(give_up - tokio::time::Instant::now())).await;
            poll = (poll * 2).min(Duration::from_millis(500));
            match store.get(&record.tenant, &record.key).await {
                Ok(Some(latest)) => record = latest,
                Ok(None) => break,
                Err(err) => return Err(store_failed(&record.tool, &err)),
            }
        }
        let mut result = match record.state {
            OperationState::Succeeded => {
                let data = record
                    .result
                    .as_deref()
                    .map(JsonText::parse)
                    .transpose()
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        ToolError::internal(format!(
                            "the stored result of {} cannot be read",
                            record.tool
                        ))
                    })?;
                CallResult::succeeded(data)
            }
            OperationState::OutcomeUnknown => CallResult::from_error(
                &ToolError::outcome_unknown(format!(
                    "an earlier {} call with these arguments may or may not have been applied",
                    record.tool
                ))
                .why("its outcome is unknown and is being reconciled with the system of record")
                .next("do not repeat the call; tell the user the outcome is being checked"),
            ),
            OperationState::Processing => CallResult::from_error(&held_elsewhere(&record.tool)),
            // A failed record is claimed again, never answered; anything else is new to us.
            _ => {
                return Err(ToolError::internal(format!(
                    "the operation of {} is in a state this release does not handle",
                    record.tool
                )));
            }
        };
        result.replayed = record.state != OperationState::Processing;
        Ok(result)
    }
}

/// The error for the same key under other arguments.
pub(super) fn conflict(descriptor: &ToolDescriptor) -> ToolError {
    let fields = descriptor.key_fields().join(", ");
    ToolError::conflict(format!(
        "an earlier {} call for the same operation had other arguments",
        descriptor.name
    ))
    .why(format!(
        "the operation is identified by {}; one operation cannot be requested twice with different arguments",
        if fields.is_empty() { "its arguments".to_owned() } else { fields }
    ))
    .next("do not repeat this call; look up the current state and tell the user what was done")
}
