//! An operation store in memory, for tests only (the `test-util` feature): it forgets everything
//! when the process ends, so it cannot keep a write from running twice across a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

mod claim;
mod outbox;
mod resolve;
mod steps;
mod tables;

use tables::{Records, Tables, truncate};

use super::{
    AbortedRun, ApprovalQuery, ApprovalRecord, ApprovalStatus, AttemptError, AuditEntry,
    AuditQuery, AuditRecord, Begun, Claim, ClaimRequest, ClaimToken, DecideRequest, DecideStep,
    Decided, Decision, DeliveryOutcome, EventLease, EventQuery, LeasedEvent, OperationQuery,
    OperationRecord, OperationState, OperationStore, OutboxEvent, Refusal, Resolution, RunAbort,
    RunKey, RunRecord, StepOutcome, StepRecord, StepStart, StoreError, TurnGrant, TurnRequest,
    Verdict,
};

/// An [`OperationStore`] in a `HashMap`. **For tests only**: nothing survives the process, which
/// is exactly what a durable store exists to survive. Use `toolgate-store-sqlite` or
/// `toolgate-store-postgres` in programs.
///
/// Exported with the `test-util` feature, and by the `toolgate-test` crate. It passes the same
/// conformance suite as the durable stores.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: Arc<Mutex<Tables>>,
    runs: Mutex<HashMap<(String, String), RunRecord>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Records) -> T) -> T {
        self.tables(|tables| f(&mut tables.records))
    }

    fn tables<T>(&self, f: impl FnOnce(&mut Tables) -> T) -> T {
        let mut tables = self
            .tables
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        f(&mut tables)
    }

    /// `f` on the record of `run` (an empty one if it has none), kept only when `f` changed
    /// it: a refusal writes nothing, as in the durable stores.
    fn with_run<T>(&self, run: RunKey<'_>, f: impl FnOnce(&mut RunRecord) -> T) -> T {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let id = (run.tenant.to_owned(), run.run_id.to_owned());
        let mut record = runs.get(&id).cloned().unwrap_or_default();
        let answer = f(&mut record);
        let changed = match runs.get(&id) {
            Some(before) => *before != record,
            None => record != RunRecord::default(),
        };
        if changed {
            runs.insert(id, record);
        }
        answer
    }

    /// Moves an owned `processing` record to `state`, appending `error`.
    fn settle_with_error(
        &self,
        owner: &ClaimToken,
        state: OperationState,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.state = state;
            record.errors.push(error.clone());
            record.updated_ms = now_ms;
        })
    }

    fn owned<T>(
        &self,
        owner: &ClaimToken,
        f: impl FnOnce(&mut OperationRecord) -> T,
    ) -> Result<T, StoreError> {
        self.with(
            |records| match records.get_mut(&(owner.tenant.clone(), owner.key.clone())) {
                Some(record)
                    if record.state == OperationState::Processing
                        && record.attempt == owner.attempt =>
                {
                    Ok(f(record))
                }
                _ => Err(StoreError::LostClaim {
                    key: owner.key.clone(),
                    attempt: owner.attempt,
                }),
            },
        )
    }
}

#[async_trait]
impl OperationStore for MemoryStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        Ok(self.tables(|tables| tables.claim(&request)))
    }

    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.state = OperationState::Succeeded;
            record.result = Some(result.to_owned());
            record.updated_ms = now_ms;
        })
    }

    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::Failed, error, now_ms)
    }

    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::OutcomeUnknown, error, now_ms)
    }

    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.errors.push(error.clone());
            record.lease_until_ms = lease_until_ms;
        })
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.with(|records| records.get(&(tenant.to_owned(), key.to_owned())).cloned()))
    }

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
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.tables(|tables| tables.resolve(tenant, key, resolution, now_ms)))
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

    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        Ok(self.with_run(request.run, |run| run.begin_turn(&request)))
    }

    /// `true`: nothing comes between the two steps of `begin_turn_and_claim` in memory that
    /// could tell them from one transaction, and the dispatcher's tests take the path a store
    /// that does both in one transaction takes.
    fn claims_with_turn(&self) -> bool {
        true
    }

    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(self.with_run(run, |run| run.charge_attempt(tool, retry_budget, now_ms)))
    }

    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.with_run(run, |run| run.note_failure(tool, request_hash, now_ms));
        Ok(())
    }

    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<AbortedRun, StoreError> {
        // The run's lock, then the tables': no other path takes them the other way round.
        Ok(self.with_run(run, |record| AbortedRun {
            abort: record.abort(abort, now_ms),
            rejected: self.tables(|tables| tables.reject_run(run.tenant, run.run_id, now_ms)),
        }))
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        let runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        Ok(runs
            .get(&(run.tenant.to_owned(), run.run_id.to_owned()))
            .cloned())
    }

    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        Ok(self.tables(|tables| {
            let Some(approval) = tables.approvals.get(request.id) else {
                return Decided::Refused {
                    refusal: Refusal::NotFound,
                    approval: None,
                };
            };
            match approval.decide_step(&request) {
                DecideStep::Refuse(refusal) => Decided::Refused {
                    refusal,
                    approval: (refusal != Refusal::NotFound).then(|| approval.clone()),
                },
                DecideStep::Expire => Decided::Refused {
                    refusal: Refusal::Expired,
                    approval: tables.reject(request.id, ApprovalRecord::expiry(request.now_ms)),
                },
                DecideStep::Apply => {
                    let decision = ApprovalRecord::decision_of(&request);
                    match request.verdict {
                        Verdict::Reject => match tables.reject(request.id, decision) {
                            Some(approval) => Decided::Applied(approval),
                            None => unreachable!("the approval was read under the same lock"),
                        },
                        Verdict::Approve => {
                            let Some(approval) = tables.approvals.get_mut(request.id) else {
                                unreachable!("the approval was read under the same lock");
                            };
                            approval.status = ApprovalStatus::Approved;
                            approval.decisions.push(decision);
                            Decided::Applied(approval.clone())
                        }
                    }
                }
            }
        }))
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| tables.approvals.get(id).cloned()))
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut listed: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| query.admits(a))
                .cloned()
                .collect();
            listed.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            truncate(&mut listed, query.limit);
            listed
        }))
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut approved: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| {
                    a.status == ApprovalStatus::Approved
                        && tables
                            .records
                            .get(&(a.tenant.clone(), a.key.clone()))
                            .is_some_and(|r| {
                                r.state == OperationState::AwaitingApproval
                                    && r.approval_id.as_deref() == Some(a.id.as_str())
                            })
                })
                .cloned()
                .collect();
            approved.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            truncate(&mut approved, limit);
            approved
        }))
    }

    async fn expire_approvals(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut due: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| a.is_expired(now_ms))
                .map(|a| (a.created_ms, a.id.clone()))
                .collect();
            due.sort();
            truncate(&mut due, limit);
            due.into_iter()
                .filter_map(|(_, id)| tables.reject(&id, ApprovalRecord::expiry(now_ms)))
                .collect()
        }))
    }

    async fn reject_claimed(
        &self,
        owner: &ClaimToken,
        decision: &Decision,
        now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError> {
        self.tables(|tables| {
            let approval = tables
                .records
                .get(&(owner.tenant.clone(), owner.key.clone()))
                .filter(|r| r.state == OperationState::Processing && r.attempt == owner.attempt)
                .and_then(|r| r.approval_id.clone());
            let lost = || StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            };
            let approval = approval.ok_or_else(lost)?;
            let rejected = tables
                .reject(&approval, decision.clone())
                .ok_or_else(lost)?;
            if let Some(record) = tables
                .records
                .get_mut(&(owner.tenant.clone(), owner.key.clone()))
            {
                record.updated_ms = now_ms;
            }
            Ok(rejected)
        })
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

    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        Ok(outbox::begin(&self.tables, &request))
    }

    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        Ok(self.tables(|tables| tables.lease_events(&lease)))
    }

    async fn settle_event(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        self.tables(|tables| tables.settle_event(&id, attempt, outcome, now_ms))
    }

    async fn resume_event(
        &self,
        tenant: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        Ok(self.tables(|tables| tables.resume_event(&id, now_ms)))
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        Ok(self.tables(|tables| tables.events.get(&id).cloned()))
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        Ok(self.tables(|tables| tables.list_events(&query)))
    }

    async fn begin_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError> {
        self.tables(|tables| tables.begin_step(owner, name, now_ms))
    }

    async fn finish_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.tables(|tables| tables.finish_step(owner, name, outcome, now_ms))
    }

    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        Ok(self.tables(|tables| tables.steps.get(&id).cloned().unwrap_or_default()))
    }

    async fn partial(
        &self,
        owner: &ClaimToken,
        report: &str,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.state = OperationState::Partial;
            record.result = Some(report.to_owned());
            record.errors.push(error.clone());
            record.updated_ms = now_ms;
        })
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        Ok(self.tables(|tables| {
            tables.last_seq += 1;
            let seq = tables.last_seq;
            tables.audit.push(AuditRecord {
                seq,
                entry: entry.clone(),
            });
            seq
        }))
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut read: Vec<_> = tables
                .audit
                .iter()
                .filter(|r| query.admits(&r.entry))
                .cloned()
                .collect();
            truncate(&mut read, query.limit);
            read
        }))
    }
}
