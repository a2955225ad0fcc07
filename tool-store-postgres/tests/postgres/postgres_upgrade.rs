//! Databases earlier releases made, opened by this store. Migrations 1 to 3, with a record in
//! each of their states and a run: migration 4 keeps every record and run as it was, and
//! approvals and the audit trail then work on them. Migrations 1 to 4, with records, an
//! approval and an audit record: migration 5 keeps them, and the outbox and the step journal
//! then work on them. Migrations 1 to 5, with outbox events: migration 6 keeps them, reads
//! them as events none of whose deliveries may have been applied, and records one that may.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use toolgate_core::store::EventSettlement;
use toolgate_core::store::StepRequest;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, AttemptError, AuditEntry, AuditKind, AuditQuery, Begun, Claim,
    ClaimRequest, ClaimToken, Commit, DecideRequest, Decided, EventStatus, FailedCall, NewEvent,
    OperationQuery, OperationRecord, OperationState, PartialOutcome, Requester, Resolution,
    ResolveRequest, RunKey, RunRecord, StepOutcome, StepStart, StepStatus, Success, Verdict,
};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::{self, SqlSafeStr};
use toolgate_test_postgres::test_database;

const T0: i64 = 1_700_000_000_000;
const LEASE_UNTIL: i64 = 9_000_000_000_000;

/// The schema of the release before approvals: migrations 1 to 3, as it applied them.
async fn previous_release(url: &str) -> sqlx::PgPool {
    release(url, 3).await
}

/// The schema of an earlier release: migrations 1 to `last`, as it applied them.
async fn release(url: &str, last: i64) -> sqlx::PgPool {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let migration = |version, name, sql: &'static str| {
        Migration::new(
            version,
            Cow::Borrowed(name),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )
    };
    let mut migrator = Migrator::with_migrations(vec![
        migration(
            1,
            "operations",
            include_str!("../../migrations/0001_operations.sql"),
        ),
        migration(
            2,
            "errors keep every character",
            include_str!("../../migrations/0002_errors_keep_every_character.sql"),
        ),
        migration(3, "runs", include_str!("../../migrations/0003_runs.sql")),
        migration(
            4,
            "approvals and audit",
            include_str!("../../migrations/0004_approvals_and_audit.sql"),
        ),
        migration(
            5,
            "outbox and steps",
            include_str!("../../migrations/0005_outbox_and_steps.sql"),
        ),
    ]);
    migrator.migrations.to_mut().retain(|m| m.version <= last);
    migrator.dangerous_set_table_name("_toolgate_store_migrations");
    migrator.run(&pool).await.unwrap();
    pool
}

/// A record as the previous release stored it.
fn old(key: &str, state: OperationState, attempt: u32) -> OperationRecord {
    OperationRecord {
        tenant: "acme".into(),
        key: key.into(),
        tool: "issue_refund".into(),
        request_hash: format!("h-{key}"),
        arguments: format!(r#"{{"order_id":"{key}"}}"#),
        state,
        attempt,
        lease_until_ms: LEASE_UNTIL,
        result: (state == OperationState::Succeeded).then(|| r#"{"refund_id":"re_1"}"#.into()),
        errors: match state {
            OperationState::Failed | OperationState::OutcomeUnknown => vec![AttemptError {
                attempt,
                kind: "unavailable".into(),
                what: "503 \0 from the provider".into(),
            }],
            _ => Vec::new(),
        },
        reconcile_tries: u32::from(state == OperationState::OutcomeUnknown),
        created_ms: T0,
        updated_ms: T0 + 1,
        approval_id: None,
    }
}

async fn insert_old(pool: &sqlx::PgPool, record: &OperationRecord) {
    sqlx::query(
        "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
         arguments, state, attempt, lease_until_ms, result, errors, reconcile_tries, \
         created_ms, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12, $13)",
    )
    .bind(&record.tenant)
    .bind(&record.key)
    .bind(&record.tool)
    .bind(&record.request_hash)
    .bind(&record.arguments)
    .bind(record.state.as_str())
    .bind(i64::from(record.attempt))
    .bind(record.lease_until_ms)
    .bind(&record.result)
    .bind(serde_json::to_string(&record.errors).unwrap())
    .bind(i64::from(record.reconcile_tries))
    .bind(record.created_ms)
    .bind(record.updated_ms)
    .execute(pool)
    .await
    .unwrap();
}

async fn insert_old_run(pool: &sqlx::PgPool) {
    for statement in [
        "INSERT INTO toolgate_runs (tenant_id, run_id, steps, tool_calls, updated_ms) \
         VALUES ('acme', 'run-0', 2, 3, 1700000000001)",
        "INSERT INTO toolgate_run_attempts (tenant_id, run_id, tool, attempts) \
         VALUES ('acme', 'run-0', 'issue_refund', 3)",
        "INSERT INTO toolgate_run_failures (tenant_id, run_id, tool, request_hash) \
         VALUES ('acme', 'run-0', 'issue_refund', 'h-failed')",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
}

fn approval(id: &str, record: &OperationRecord, now_ms: i64) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: record.tenant.clone(),
        key: record.key.clone(),
        tool: record.tool.clone(),
        request_hash: record.request_hash.clone(),
        policy_hash: "p1".into(),
        arguments: record.arguments.clone(),
        amount: "8000.00".into(),
        threshold: "5000".into(),
        requester: Requester {
            user: "agent".into(),
            permissions: vec!["refund:create".into()],
        },
        run_id: "run-1".into(),
        call_id: "call_1".into(),
        approver_permission: "refund:approve".into(),
        created_ms: now_ms,
        expires_ms: now_ms + 3_600_000,
        status: ApprovalStatus::Pending,
        decisions: Vec::new(),
    }
}

fn claim_of<'a>(
    record: &'a OperationRecord,
    approval: Option<&'a ApprovalRecord>,
    now_ms: i64,
) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant: &record.tenant,
        key: &record.key,
        tool: &record.tool,
        request_hash: &record.request_hash,
        unkeyed: None,
        arguments: &record.arguments,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval,
    }
}

fn decision<'a>(
    id: &'a str,
    approver: &'a toolgate_core::identity::Operator,
    verdict: Verdict,
    now_ms: i64,
) -> DecideRequest<'a> {
    DecideRequest {
        id,
        approver,
        verdict,
        reason: "checked",
        now_ms,
    }
}

fn audit_entry(key: &str, outcome: &str, at_ms: i64) -> AuditEntry {
    AuditEntry {
        kind: AuditKind::Call,
        tenant: "acme".into(),
        run_id: "run-1".into(),
        call_id: "call_1".into(),
        tool: "issue_refund".into(),
        actor: "agent".into(),
        arguments: "{}".into(),
        attempts: 1,
        duration_ms: 12,
        outcome: outcome.into(),
        error_kind: None,
        replayed: false,
        bytes: 40,
        key: Some(key.into()),
        approval_id: None,
        reason: None,
        at_ms,
    }
}

#[tokio::test]
async fn a_database_of_the_previous_release_keeps_its_records_and_gains_approvals() {
    let url = test_database().await;
    let pool = previous_release(&url).await;
    let processing = old("processing", OperationState::Processing, 1);
    let succeeded = old("succeeded", OperationState::Succeeded, 1);
    let failed = old("failed", OperationState::Failed, 1);
    let unknown = old("unknown", OperationState::OutcomeUnknown, 2);
    let records = [&processing, &succeeded, &failed, &unknown];
    for record in records {
        insert_old(&pool, record).await;
    }
    insert_old_run(&pool).await;
    pool.close().await;

    let store = PostgresStore::connect(&url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _toolgate_store_migrations ORDER BY version")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9]);

    // Every record and the run are kept as they were.
    for record in records {
        let kept = store.get("acme", &record.key).await.unwrap();
        assert_eq!(kept.as_ref(), Some(record));
    }
    let run = RunKey {
        tenant: "acme",
        run_id: "run-0",
    };
    let expected_run = RunRecord {
        steps: 2,
        tool_calls: 3,
        attempts: BTreeMap::from([("issue_refund".to_owned(), 3)]),
        failed: BTreeSet::from([FailedCall {
            tool: "issue_refund".into(),
            request_hash: "h-failed".into(),
        }]),
        aborted: None,
        updated_ms: T0 + 1,
    };
    assert_eq!(store.run(run).await.unwrap(), Some(expected_run));
    let all = store
        .list_operations(OperationQuery::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(
        store.list_unknown(10).await.unwrap(),
        std::slice::from_ref(&unknown)
    );

    // The old processing record is settled by its worker as before.
    let worker = ClaimToken {
        tenant: "acme".into(),
        key: "processing".into(),
        attempt: 1,
    };
    store
        .succeed(Success {
            owner: &worker,
            result: "{}",
            now_ms: T0 + 5,
            audit: None,
        })
        .await
        .unwrap();
    // A replay of the old succeeded one is answered from the store.
    let replay = store
        .claim(claim_of(&succeeded, None, T0 + 5))
        .await
        .unwrap();
    assert_eq!(replay, Claim::Existing(succeeded.clone()));

    // The old failed record waits for an approval, is approved, and runs once.
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    let asked = approval("apr_failed", &failed, T0 + 10);
    let waiting = store
        .claim(claim_of(&failed, Some(&asked), T0 + 10))
        .await
        .unwrap();
    assert_eq!(waiting, Claim::Approval(asked.clone()));
    let record = store.get("acme", "failed").await.unwrap().expect("kept");
    assert_eq!(
        (record.state, record.attempt, record.approval_id.as_deref()),
        (OperationState::AwaitingApproval, 1, Some("apr_failed"))
    );
    assert_eq!(record.errors, failed.errors, "earlier errors are kept");
    let decided = store
        .decide(decision("apr_failed", &manager, Verdict::Approve, T0 + 20))
        .await
        .unwrap();
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
    assert_eq!(store.list_approved(0).await.unwrap().len(), 1);
    let ran = store.claim(claim_of(&failed, None, T0 + 30)).await.unwrap();
    let Claim::Acquired {
        attempt: 2,
        approved: Some(approved),
    } = ran
    else {
        panic!("the approved operation runs as attempt 2: {ran:?}");
    };
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert!(store.list_approved(0).await.unwrap().is_empty());

    // The old unknown one, settled as not applied, asks again and is rejected.
    store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "unknown",
            resolution: Resolution::NotApplied,
            now_ms: T0 + 40,
        })
        .await
        .unwrap()
        .expect("settled");
    let asked = approval("apr_unknown", &unknown, T0 + 41);
    store
        .claim(claim_of(&unknown, Some(&asked), T0 + 41))
        .await
        .unwrap();
    let decided = store
        .decide(decision("apr_unknown", &manager, Verdict::Reject, T0 + 42))
        .await
        .unwrap();
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
    let record = store.get("acme", "unknown").await.unwrap().expect("kept");
    assert_eq!(record.state, OperationState::Rejected);

    // The audit trail of old operations is read by run and by operation.
    let first = store
        .append_audit(&audit_entry("succeeded", "succeeded", T0 + 50))
        .await
        .unwrap();
    let second = store
        .append_audit(&audit_entry("unknown", "rejected", T0 + 51))
        .await
        .unwrap();
    assert!(second > first);
    let by_run = store
        .audit(AuditQuery {
            run_id: Some("run-1"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_run.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [first, second]
    );
    let touched = store
        .list_operations(OperationQuery {
            run_id: Some("run-1"),
            ..OperationQuery::default()
        })
        .await
        .unwrap();
    let keys: Vec<&str> = touched.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["succeeded", "unknown"]);

    // Retention purges the settled old records, the rejected one with its approval, and the
    // audit of operations that are gone; the approved one, still running, stays.
    let purged = store.purge(T0 + 1_000).await.unwrap();
    assert_eq!(
        purged, 3,
        "processing (now succeeded), succeeded and rejected"
    );
    assert_eq!(store.approval("apr_unknown").await.unwrap(), None);
    assert!(store.approval("apr_failed").await.unwrap().is_some());
    assert!(store.audit(AuditQuery::default()).await.unwrap().is_empty());
    let left = store
        .list_operations(OperationQuery::default())
        .await
        .unwrap();
    assert_eq!(
        left.iter()
            .map(|r| (r.key.as_str(), r.state))
            .collect::<Vec<_>>(),
        [("failed", OperationState::Processing)]
    );
}

#[tokio::test]
async fn a_database_of_the_approvals_release_keeps_its_records_and_gains_the_outbox_and_steps() {
    let url = test_database().await;
    let pool = release(&url, 4).await;
    let processing = old("processing", OperationState::Processing, 1);
    let succeeded = old("succeeded", OperationState::Succeeded, 1);
    let failed = old("failed", OperationState::Failed, 1);
    let unknown = old("unknown", OperationState::OutcomeUnknown, 2);
    for record in [&processing, &succeeded, &failed, &unknown] {
        insert_old(&pool, record).await;
    }
    pool.close().await;
    // Approvals and audit records written by that release's store.
    let store = {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        PostgresStore::from_pool(pool)
    };
    let waiting = old("waiting", OperationState::Processing, 0);
    let asked = approval("apr_waiting", &waiting, T0 + 2);
    store
        .claim(claim_of(&waiting, Some(&asked), T0 + 2))
        .await
        .unwrap();
    let audited = store
        .append_audit(&audit_entry("succeeded", "succeeded", T0 + 3))
        .await
        .unwrap();
    let waiting = store.get("acme", "waiting").await.unwrap().unwrap();
    store.close().await;

    let store = PostgresStore::connect(&url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _toolgate_store_migrations ORDER BY version")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9]);

    // Every record, the approval and the audit record are kept as they were.
    for record in [&processing, &succeeded, &failed, &unknown, &waiting] {
        assert_eq!(
            store.get("acme", &record.key).await.unwrap().as_ref(),
            Some(record)
        );
    }
    assert_eq!(store.approval("apr_waiting").await.unwrap(), Some(asked));
    let trail = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(trail.iter().map(|r| r.seq).collect::<Vec<_>>(), [audited]);
    assert!(
        store
            .list_events(Default::default())
            .await
            .unwrap()
            .is_empty()
    );

    // The old failed record is taken again inside a transaction and queued with an event.
    let Begun::Open { tx, attempt, .. } =
        store.begin(claim_of(&failed, None, T0 + 10)).await.unwrap()
    else {
        panic!("the failed record is taken again");
    };
    assert_eq!(attempt, 2);
    let event = NewEvent {
        payload: r#"{"order_id":"failed"}"#.into(),
    };
    let owner = ClaimToken {
        tenant: "acme".into(),
        key: "failed".into(),
        attempt,
    };
    tx.commit(Commit {
        owner: &owner,
        result: r#"{"accepted":true}"#,
        event: Some(&event),
        now_ms: T0 + 11,
    })
    .await
    .unwrap();
    let record = store.get("acme", "failed").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Queued);
    assert_eq!(record.errors, failed.errors, "earlier errors are kept");
    let event = store.event("acme", "failed").await.unwrap().expect("event");
    assert_eq!(event.status, EventStatus::Pending);

    // The old processing record journals steps, and ends partial.
    let worker = ClaimToken {
        tenant: "acme".into(),
        key: "processing".into(),
        attempt: 1,
    };
    assert_eq!(
        store
            .begin_step(StepRequest {
                owner: &worker,
                name: "update_crm",
                now_ms: T0 + 20
            })
            .await
            .unwrap(),
        StepStart::Run
    );
    store
        .finish_step(
            StepRequest {
                owner: &worker,
                name: "update_crm",
                now_ms: T0 + 21,
            },
            StepOutcome::Succeeded("1"),
        )
        .await
        .unwrap();
    let error = AttemptError {
        attempt: 1,
        kind: "unavailable".into(),
        what: "notify failed".into(),
    };
    store
        .partial(PartialOutcome {
            owner: &worker,
            report: r#"{"steps":[]}"#,
            error: &error,
            now_ms: T0 + 22,
        })
        .await
        .unwrap();
    let record = store.get("acme", "processing").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Partial);
    let steps = store.steps("acme", "processing").await.unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|s| (s.name.as_str(), s.seq, s.status))
            .collect::<Vec<_>>(),
        [("update_crm", 1, StepStatus::Succeeded)]
    );
}

#[tokio::test]
async fn a_database_of_the_outbox_release_keeps_its_events_as_not_maybe_applied() {
    let url = test_database().await;
    let pool = release(&url, 5).await;
    for key in ["retried", "dead"] {
        insert_old(&pool, &old(key, OperationState::Succeeded, 1)).await;
    }
    sqlx::query("UPDATE toolgate_operations SET state = 'queued'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO toolgate_outbox (tenant_id, idempotency_key, tool, payload, status, \
         attempt, due_ms, last_error, created_ms, updated_ms) \
         VALUES ('acme', 'retried', 'issue_refund', '{}', 'pending', 1, $1, \
                 '{\"attempt\":1,\"kind\":\"unavailable\",\"what\":\"503\"}', $1, $1), \
                ('acme', 'dead', 'issue_refund', '{}', 'dead', 3, $1, \
                 '{\"attempt\":3,\"kind\":\"refused\",\"what\":\"no\"}', $1, $1)",
    )
    .bind(T0)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = PostgresStore::connect(&url).await.unwrap();
    let events = store.list_events(Default::default()).await.unwrap();
    let read: Vec<(&str, EventStatus, u32, bool)> = events
        .iter()
        .map(|e| (e.key.as_str(), e.status, e.attempt, e.maybe_applied))
        .collect();
    assert_eq!(
        read,
        [
            ("dead", EventStatus::Dead, 3, false),
            ("retried", EventStatus::Pending, 1, false)
        ]
    );
    // The old pending event is leased, and its lost answer is remembered.
    let leased = store
        .lease_events(toolgate_core::store::EventLease {
            worker: "w1",
            tools: &["issue_refund"],
            now_ms: T0 + 10,
            lease: Duration::from_secs(30),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].event.attempt, 2);
    let lost = AttemptError {
        attempt: 2,
        kind: "outcome_unknown".into(),
        what: "reset".into(),
    };
    let retry = toolgate_core::store::DeliveryOutcome::Retry {
        error: &lost,
        due_ms: T0 + 1_000,
        maybe_applied: true,
    };
    let event = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "retried",
            attempt: 2,
            outcome: retry,
            now_ms: T0 + 20,
            audit: None,
        })
        .await
        .unwrap();
    assert!(event.maybe_applied, "{event:?}");
    assert_eq!(store.event("acme", "retried").await.unwrap(), Some(event));
}
