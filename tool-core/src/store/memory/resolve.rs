//! The reconciler's answer about an unknown outcome, in the
//! [`MemoryStore`](super::MemoryStore): what `resolve` does on its tables.

use crate::store::{EventStatus, OperationRecord, OperationState, Resolution};

use super::tables::Tables;

impl Tables {
    /// Settles the `outcome_unknown` record of `key` as `resolution` says; `None` for a record
    /// in any other state, or none.
    pub(super) fn resolve(
        &mut self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Option<OperationRecord> {
        let id = (tenant.to_owned(), key.to_owned());
        let record = self.records.get(&id)?;
        if record.state != OperationState::OutcomeUnknown {
            return None;
        }
        let has_event = self.events.contains_key(&id);
        let state = match resolution {
            Resolution::Applied(_) => OperationState::Succeeded,
            Resolution::NotApplied if has_event => OperationState::Queued,
            Resolution::NotApplied if self.steps_not_applied(&id, now_ms) => {
                OperationState::Partial
            }
            Resolution::NotApplied => OperationState::Failed,
            Resolution::StillUnknown => OperationState::OutcomeUnknown,
        };
        if let Some(event) = self.events.get_mut(&id) {
            match resolution {
                Resolution::Applied(result) => {
                    event.status = EventStatus::Delivered;
                    event.result = Some(result.to_owned());
                    event.updated_ms = now_ms;
                }
                Resolution::NotApplied => {
                    event.status = EventStatus::Pending;
                    event.due_ms = now_ms;
                    event.maybe_applied = false;
                    event.updated_ms = now_ms;
                }
                Resolution::StillUnknown => {}
            }
        }
        let record = self.records.get_mut(&id)?;
        match resolution {
            // An outbox operation keeps the tool's own result.
            Resolution::Applied(result) if !has_event => {
                record.result = Some(result.to_owned());
            }
            Resolution::StillUnknown => record.reconcile_tries += 1,
            _ => {}
        }
        record.state = state;
        record.updated_ms = now_ms;
        Some(record.clone())
    }
}
