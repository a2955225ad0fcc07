//! The outbox of the [`MemoryStore`](super::MemoryStore): `begin`'s transaction, and the events.
//!
//! Its "transaction" is not isolated: while an outbox tool's body runs, other callers see the
//! `processing` record, as they would see any running claim; a rollback puts back the record as
//! it was before the claim. It has no connection for the tool's own rows.

use std::any::Any;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::{Tables, truncate};
use crate::store::{
    AuditStore, Begun, Claim, ClaimRequest, Commit, DeliveryOutcome, EventLease, EventQuery,
    EventSettlement, EventStatus, LeasedEvent, OperationRecord, OperationState, OutboxEvent,
    OutboxStore, ResumeRequest, StepRecord, StoreError, StoreTransaction,
};

type Id = (String, String);

/// What [`MemoryStore::begin`](super::MemoryStore) hands out: the tables, and what the claim
/// changed, to put back on a rollback.
struct MemoryTransaction {
    tables: Arc<Mutex<Tables>>,
    id: Id,
    attempt: u32,
    before: Option<OperationRecord>,
    steps_before: Option<Vec<StepRecord>>,
    /// The memory store has no connection; the tool gets this unit.
    connection: (),
    done: bool,
}

fn lock(tables: &Mutex<Tables>) -> std::sync::MutexGuard<'_, Tables> {
    tables.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl MemoryTransaction {
    /// Puts back the record (and journal) as it was before the claim, if the claim still holds
    /// it.
    fn undo(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let mut tables = lock(&self.tables);
        let held = tables
            .records
            .get(&self.id)
            .is_some_and(|r| r.state == OperationState::Processing && r.attempt == self.attempt);
        if !held {
            return;
        }
        match self.before.take() {
            Some(before) => {
                tables.records.insert(self.id.clone(), before);
            }
            None => {
                tables.records.remove(&self.id);
            }
        }
        match self.steps_before.take() {
            Some(steps) => {
                tables.steps.insert(self.id.clone(), steps);
            }
            None => {
                tables.steps.remove(&self.id);
            }
        }
    }
}

impl Drop for MemoryTransaction {
    fn drop(&mut self) {
        self.undo();
    }
}

#[async_trait]
impl StoreTransaction for MemoryTransaction {
    fn connection(&mut self) -> &mut (dyn Any + Send) {
        &mut self.connection
    }

    fn store_name(&self) -> &'static str {
        "memory"
    }

    async fn commit(mut self: Box<Self>, commit: Commit<'_>) -> Result<(), StoreError> {
        self.done = true;
        let mut tables = lock(&self.tables);
        let owner = commit.owner;
        let Some(record) = tables.records.get_mut(&self.id) else {
            return Err(lost(owner.key.clone(), owner.attempt));
        };
        if record.state != OperationState::Processing || record.attempt != owner.attempt {
            return Err(lost(owner.key.clone(), owner.attempt));
        }
        record.state = if commit.event.is_some() {
            OperationState::Queued
        } else {
            OperationState::Succeeded
        };
        record.result = Some(commit.result.to_owned());
        record.updated_ms = commit.now_ms;
        let tool = record.tool.clone();
        if let Some(event) = commit.event {
            tables.events.insert(
                self.id.clone(),
                OutboxEvent {
                    tenant: self.id.0.clone(),
                    key: self.id.1.clone(),
                    tool,
                    payload: event.payload.clone(),
                    status: EventStatus::Pending,
                    attempt: 0,
                    resumed_at: 0,
                    lease_until_ms: 0,
                    due_ms: commit.now_ms,
                    worker: None,
                    last_error: None,
                    result: None,
                    maybe_applied: false,
                    created_ms: commit.now_ms,
                    updated_ms: commit.now_ms,
                },
            );
        }
        Ok(())
    }

    async fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        self.undo();
        Ok(())
    }
}

fn lost(key: String, attempt: u32) -> StoreError {
    StoreError::LostClaim { key, attempt }
}

/// `begin`: the claim under the lock; an acquired one stays open.
pub(super) fn begin(tables: &Arc<Mutex<Tables>>, request: &ClaimRequest<'_>) -> Begun {
    let id = (request.tenant.to_owned(), request.key.to_owned());
    let mut guard = lock(tables);
    let before = guard.records.get(&id).cloned();
    let steps_before = guard.steps.get(&id).cloned();
    match guard.claim(request) {
        Claim::Acquired { attempt, approved } => {
            drop(guard);
            Begun::Open {
                tx: Box::new(MemoryTransaction {
                    tables: Arc::clone(tables),
                    id,
                    attempt,
                    before,
                    steps_before,
                    connection: (),
                    done: false,
                }),
                attempt,
                approved,
            }
        }
        other => Begun::Settled(other),
    }
}

impl Tables {
    pub(super) fn lease_events(&mut self, lease: &EventLease<'_>) -> Vec<LeasedEvent> {
        let mut due: Vec<&mut OutboxEvent> = self
            .events
            .values_mut()
            .filter(|e| lease.tools.contains(&e.tool.as_str()))
            .filter(|e| match e.status {
                EventStatus::Pending => e.due_ms <= lease.now_ms,
                EventStatus::Leased => e.lease_until_ms <= lease.now_ms,
                _ => false,
            })
            .collect();
        due.sort_by(|a, b| {
            (a.created_ms, &a.tenant, &a.key).cmp(&(b.created_ms, &b.tenant, &b.key))
        });
        due.truncate(lease.limit as usize);
        due.into_iter()
            .map(|event| {
                let taken_over = event.status == EventStatus::Leased;
                event.status = EventStatus::Leased;
                event.maybe_applied |= taken_over;
                event.attempt += 1;
                event.lease_until_ms = lease.lease_until_ms();
                event.worker = Some(lease.worker.to_owned());
                event.updated_ms = lease.now_ms;
                LeasedEvent {
                    event: event.clone(),
                    taken_over,
                }
            })
            .collect()
    }

    pub(super) fn settle_event(
        &mut self,
        id: &Id,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError> {
        let Some(event) = self.events.get_mut(id) else {
            return Err(lost(id.1.clone(), attempt));
        };
        if event.status != EventStatus::Leased || event.attempt != attempt {
            return Err(lost(id.1.clone(), attempt));
        }
        let record = self.records.get_mut(id);
        event.maybe_applied |= outcome.marks_maybe_applied();
        match outcome {
            DeliveryOutcome::Delivered(result) => {
                event.status = EventStatus::Delivered;
                event.result = Some(result.to_owned());
                if let Some(record) = record {
                    record.state = OperationState::Succeeded;
                    record.updated_ms = now_ms;
                }
            }
            DeliveryOutcome::Retry { error, due_ms, .. } => {
                event.status = EventStatus::Pending;
                event.due_ms = due_ms;
                event.last_error = Some(error.clone());
            }
            DeliveryOutcome::Dead(error) => {
                event.status = EventStatus::Dead;
                event.last_error = Some(error.clone());
            }
            DeliveryOutcome::Unknown(error) => {
                event.status = EventStatus::Unknown;
                event.last_error = Some(error.clone());
                if let Some(record) = record {
                    record.state = OperationState::OutcomeUnknown;
                    record.errors.push(error.clone());
                    record.updated_ms = now_ms;
                }
            }
        }
        event.updated_ms = now_ms;
        Ok(event.clone())
    }

    pub(super) fn resume_event(&mut self, id: &Id, now_ms: i64) -> Option<OutboxEvent> {
        let event = self.events.get_mut(id)?;
        if event.status == EventStatus::Dead {
            event.status = EventStatus::Pending;
            event.due_ms = now_ms;
            event.resumed_at = event.attempt;
            event.updated_ms = now_ms;
        }
        Some(event.clone())
    }

    pub(super) fn list_events(&self, query: &EventQuery<'_>) -> Vec<OutboxEvent> {
        let mut listed: Vec<OutboxEvent> = self
            .events
            .values()
            .filter(|e| {
                query.tenant.is_none_or(|t| e.tenant == t)
                    && query.status.is_none_or(|s| e.status == s)
            })
            .cloned()
            .collect();
        listed.sort_by(|a, b| {
            (a.created_ms, &a.tenant, &a.key).cmp(&(b.created_ms, &b.tenant, &b.key))
        });
        truncate(&mut listed, query.limit);
        listed
    }
}

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        Ok(begin(&self.tables, &request))
    }

    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        Ok(self.tables(|tables| tables.lease_events(&lease)))
    }

    /// With `settlement.audit`: the outcome, then the audit record, as two steps.
    async fn settle_event(
        &self,
        settlement: EventSettlement<'_>,
    ) -> Result<OutboxEvent, StoreError> {
        let id = (settlement.tenant.to_owned(), settlement.key.to_owned());
        let event = self.tables(|tables| {
            tables.settle_event(
                &id,
                settlement.attempt,
                settlement.outcome,
                settlement.now_ms,
            )
        })?;
        if let Some(entry) = settlement.audit
            && let Err(err) = self.append_audit(entry).await
        {
            tracing::warn!(error = %err, "the audit record of a delivery could not be appended");
        }
        Ok(event)
    }

    async fn resume_event(
        &self,
        request: ResumeRequest<'_>,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let id = (request.tenant.to_owned(), request.key.to_owned());
        Ok(self.tables(|tables| tables.resume_event(&id, request.now_ms)))
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        Ok(self.tables(|tables| tables.events.get(&id).cloned()))
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        Ok(self.tables(|tables| tables.list_events(&query)))
    }
}
