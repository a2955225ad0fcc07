//! The reconciler's answer about an unknown outcome, in the
//! [`MemoryStore`](super::MemoryStore): what `resolve` does on its tables.

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::{Tables, truncate};
use crate::store::{
    EventStatus, OperationLog, OperationQuery, OperationRecord, OperationState, Resolution,
    ResolveRequest, StoreError,
};

impl Tables {
    /// Settles the `outcome_unknown` record of `request.key` as `request.resolution` says;
    /// `None` for a record in any other state, or none.
    pub(super) fn resolve(&mut self, request: ResolveRequest<'_>) -> Option<OperationRecord> {
        let id = (request.tenant.to_owned(), request.key.to_owned());
        let (resolution, now_ms) = (request.resolution, request.now_ms);
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

#[async_trait]
impl OperationLog for MemoryStore {
    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(self.with(|records| {
            let mut count = 0;
            for record in records.values_mut() {
                if record.state == OperationState::Processing && record.lease_until_ms <= now_ms {
                    record.state = OperationState::OutcomeUnknown;
                    record.updated_ms = now_ms;
                    count += 1;
                }
            }
            count
        }))
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(self.with(|records| {
            let mut unknown: Vec<_> = records
                .values()
                .filter(|r| r.state == OperationState::OutcomeUnknown)
                .cloned()
                .collect();
            unknown.sort_by(|a, b| {
                (a.updated_ms, &a.tenant, &a.key).cmp(&(b.updated_ms, &b.tenant, &b.key))
            });
            unknown.truncate(limit as usize);
            unknown
        }))
    }

    async fn resolve(
        &self,
        request: ResolveRequest<'_>,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.tables(|tables| tables.resolve(request)))
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let purged = self.tables(|tables| {
            let before = tables.records.len();
            tables
                .records
                .retain(|_, r| !(r.state.is_terminal() && r.updated_ms < before_ms));
            let Tables {
                records,
                approvals,
                audit,
                events,
                steps,
                ..
            } = tables;
            approvals.retain(|_, a| records.contains_key(&(a.tenant.clone(), a.key.clone())));
            events.retain(|id, _| records.contains_key(id));
            steps.retain(|id, _| records.contains_key(id));
            audit.retain(|record| {
                let entry = &record.entry;
                entry.at_ms >= before_ms
                    || entry.key.as_ref().is_some_and(|key| {
                        records.contains_key(&(entry.tenant.clone(), key.clone()))
                    })
            });
            (before - tables.records.len()) as u64
        });
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        runs.retain(|_, run| run.updated_ms >= before_ms);
        Ok(purged)
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let touched: Option<Vec<(&str, &str)>> = query.run_id.map(|run| {
                tables
                    .audit
                    .iter()
                    .filter(|r| r.entry.run_id == run)
                    .filter_map(|r| Some((r.entry.tenant.as_str(), r.entry.key.as_deref()?)))
                    .collect()
            });
            let mut listed: Vec<_> = tables
                .records
                .values()
                .filter(|r| {
                    query.tenant.is_none_or(|t| r.tenant == t)
                        && query.state.is_none_or(|s| r.state == s)
                        && touched
                            .as_ref()
                            .is_none_or(|keys| keys.contains(&(r.tenant.as_str(), r.key.as_str())))
                })
                .cloned()
                .collect();
            listed.sort_by(|a, b| {
                (a.created_ms, &a.tenant, &a.key).cmp(&(b.created_ms, &b.tenant, &b.key))
            });
            truncate(&mut listed, query.limit);
            listed
        }))
    }
}
