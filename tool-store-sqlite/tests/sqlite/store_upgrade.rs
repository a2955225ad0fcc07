//! A file written by the previous release (schema version 2: operations and the run ledger)
//! opened by this one: every row kept byte for byte, and approvals and the audit trail working
//! on its records. A migration that cannot finish leaves the file as it was. A file of schema
//! version 4 (the outbox) keeps its events, read as events none of whose deliveries may have
//! been applied.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use toolgate_core::store::EventSettlement;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, AuditEntry, AuditKind, AuditQuery, Claim, ClaimRequest,
    DecideRequest, Decided, OperationQuery, OperationState, Requester, RunKey, StoreError, Verdict,
};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

/// Rows in every state of the previous release, with texts that must come back unchanged, and
/// a run with its attempts and a failed call.
const OLD_ROWS: &str = r#"
INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, state,
                        attempt, lease_until_ms, result, errors, reconcile_tries,
                        created_ms, updated_ms)
VALUES
 ('acme', 'running', 'issue_refund', 'h-run', '{"amount":"20.00","note":"«vite» ✓"}',
  'processing', 1, 1700000030000, NULL, '[]', 0, 1700000000000, 1700000000000),
 ('acme', 'done', 'issue_refund', 'h-done', '{"amount":"10.00","order_id":"ORD-1001"}',
  'succeeded', 2, 1700000030000, '{"refund_id":"re_1","memo":"a\nb"}',
  '[{"attempt":1,"kind":"provider_unavailable","what":"HTTP 503"}]', 0,
  1700000000000, 1700000001000),
 ('acme', 'broken', 'issue_refund', 'h-broken', '{"amount":"99999.00"}',
  'failed', 1, 1700000030000, NULL,
  '[{"attempt":1,"kind":"refused","what":"over the balance"}]', 0,
  1700000000000, 1700000002000),
 ('globex', 'lost', 'cancel_order', 'h-lost', '{"order_id":"ORD-7"}',
  'outcome_unknown', 3, 1700000030000, NULL,
  '[{"attempt":3,"kind":"outcome_unknown","what":"timed out after sending"}]', 2,
  1700000000000, 1700000003000);
INSERT INTO runs (tenant_id, run_id, steps, tool_calls, aborted_kind, aborted_reason, updated_ms)
VALUES ('acme', 'run-1', 3, 5, NULL, NULL, 1700000004000),
       ('globex', 'run-9', 1, 1, 'budget_exhausted', 'too many calls', 1700000004000);
INSERT INTO run_attempts (tenant_id, run_id, tool, attempts)
VALUES ('acme', 'run-1', 'issue_refund', 2), ('acme', 'run-1', 'get_order', 3);
INSERT INTO run_failures (tenant_id, run_id, tool, request_hash)
VALUES ('acme', 'run-1', 'issue_refund', 'h-broken');
"#;

/// A plain connection to `path`, as another program (or the previous release) would open it.
async fn connect(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("a plain connection")
}

/// Every row of the previous release's tables, each column as its SQL literal (`quote`), so two
/// dumps are equal only when every value and its type are.
async fn dump(path: &Path) -> Vec<String> {
    let mut conn = connect(path).await;
    let mut rows = Vec::new();
    for sql in [
        "SELECT 'operations:' || quote(tenant_id) || ',' || quote(idempotency_key) || ',' || \
                quote(tool) || ',' || quote(request_hash) || ',' || quote(arguments) || ',' || \
                quote(state) || ',' || quote(attempt) || ',' || quote(lease_until_ms) || ',' || \
                quote(result) || ',' || quote(errors) || ',' || quote(reconcile_tries) || ',' || \
                quote(created_ms) || ',' || quote(updated_ms) \
         FROM operations ORDER BY tenant_id, idempotency_key",
        "SELECT 'runs:' || quote(tenant_id) || ',' || quote(run_id) || ',' || quote(steps) || \
                ',' || quote(tool_calls) || ',' || quote(aborted_kind) || ',' || \
                quote(aborted_reason) || ',' || quote(updated_ms) \
         FROM runs ORDER BY tenant_id, run_id",
        "SELECT 'run_attempts:' || quote(tenant_id) || ',' || quote(run_id) || ',' || \
                quote(tool) || ',' || quote(attempts) \
         FROM run_attempts ORDER BY tenant_id, run_id, tool",
        "SELECT 'run_failures:' || quote(tenant_id) || ',' || quote(run_id) || ',' || \
                quote(tool) || ',' || quote(request_hash) \
         FROM run_failures ORDER BY tenant_id, run_id, tool, request_hash",
    ] {
        let table: Vec<String> = sqlx::query_scalar(sql)
            .fetch_all(&mut conn)
            .await
            .expect(sql);
        rows.extend(table);
    }
    conn.close().await.expect("close");
    rows
}

/// `PRAGMA user_version` of the file at `path`.
async fn version(path: &Path) -> i64 {
    let mut conn = connect(path).await;
    let version = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut conn)
        .await
        .expect("the schema version");
    conn.close().await.expect("close");
    version
}

/// A file of the previous release at `path`, holding [`OLD_ROWS`].
async fn previous_release(path: &Path) {
    SqliteStore::options(path)
        .migrate_to_version(2)
        .await
        .expect("a file of schema version 2");
    let mut conn = connect(path).await;
    sqlx::raw_sql(OLD_ROWS)
        .execute(&mut conn)
        .await
        .expect("the previous release's rows");
    // The previous schema knows nothing of approvals: its CHECK refuses the new state.
    let refused = sqlx::raw_sql(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms) \
         VALUES ('acme', 'x', 't', 'h', '{}', 'awaiting_approval', 1, 0, 0, 0)",
    )
    .execute(&mut conn)
    .await;
    assert!(refused.is_err(), "version 2 has no state awaiting_approval");
    conn.close().await.expect("close");
    assert_eq!(version(path).await, 2);
}

/// A claim of `key` for `tenant` at `now_ms`, optionally over the threshold.
fn claim<'a>(
    tenant: &'a str,
    key: &'a str,
    hash: &'a str,
    now_ms: i64,
    approval: Option<&'a ApprovalRecord>,
) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant,
        key,
        tool: "issue_refund",
        request_hash: hash,
        unkeyed: None,
        arguments: r#"{"amount":"8000.00"}"#,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval,
    }
}

fn approval(id: &str, key: &str, hash: &str) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: "acme".into(),
        key: key.into(),
        tool: "issue_refund".into(),
        request_hash: hash.into(),
        policy_hash: "p1".into(),
        arguments: r#"{"amount":"8000.00"}"#.into(),
        amount: "8000.00".into(),
        threshold: "5000".into(),
        requester: Requester {
            user: "agent".into(),
            permissions: vec!["refund:create".into()],
        },
        run_id: "run-1".into(),
        call_id: "call_9".into(),
        approver_permission: "refund:approve".into(),
        created_ms: T0 + 10_000,
        expires_ms: T0 + 3_610_000,
        status: ApprovalStatus::Pending,
        decisions: Vec::new(),
    }
}

/// Every row of the previous release is kept byte for byte; its records read back as they were
/// written, with no approval; opening again changes nothing.
#[tokio::test]
async fn a_file_of_the_previous_release_keeps_every_row() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    previous_release(&path).await;
    let before = dump(&path).await;
    assert_eq!(before.len(), 4 + 2 + 2 + 1, "{before:#?}");

    let store = SqliteStore::open(&path).await?;
    store.close().await;
    assert_eq!(version(&path).await, 6, "migrated through 3, 4 and 5 to 6");
    assert_eq!(dump(&path).await, before);

    let store = SqliteStore::open(&path).await?;
    let done = store.get("acme", "done").await?.expect("kept");
    assert_eq!(done.state, OperationState::Succeeded);
    assert_eq!(done.attempt, 2);
    assert_eq!(
        done.result.as_deref(),
        Some(r#"{"refund_id":"re_1","memo":"a\nb"}"#)
    );
    assert_eq!(done.errors.len(), 1);
    assert_eq!(done.approval_id, None);
    let running = store.get("acme", "running").await?.expect("kept");
    assert_eq!(running.arguments, r#"{"amount":"20.00","note":"«vite» ✓"}"#);
    assert_eq!(running.state, OperationState::Processing);
    let lost = store.get("globex", "lost").await?.expect("kept");
    assert_eq!(
        (lost.state, lost.attempt, lost.reconcile_tries),
        (OperationState::OutcomeUnknown, 3, 2)
    );
    let run = store
        .run(RunKey {
            tenant: "acme",
            run_id: "run-1",
        })
        .await?
        .expect("the run is kept");
    assert_eq!((run.steps, run.tool_calls), (3, 5));
    assert_eq!(run.attempts.get("get_order"), Some(&3));
    assert_eq!(run.failed.len(), 1);
    let all = store.list_operations(OperationQuery::default()).await?;
    assert_eq!(all.len(), 4);
    store.close().await;

    let mut conn = connect(&path).await;
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .expect("integrity check");
    assert_eq!(integrity, "ok");
    conn.close().await.expect("close");
    assert_eq!(version(&path).await, 6);
    assert_eq!(dump(&path).await, before);
    Ok(())
}

/// On the upgraded file, an old `failed` record waits for an approval, is approved and runs
/// once; an old succeeded record still replays; the audit trail and its queries work on the
/// old run; retention purges old settled records and keeps the waiting one.
#[tokio::test]
async fn approvals_and_the_audit_trail_work_on_an_upgraded_file() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    previous_release(&path).await;
    let store = SqliteStore::open(&path).await?;

    let asked = approval("apr_1", "broken", "h-broken");
    assert_eq!(
        store
            .claim(claim(
                "acme",
                "broken",
                "h-broken",
                T0 + 10_000,
                Some(&asked)
            ))
            .await?,
        Claim::Approval(asked.clone())
    );
    let waiting = store.get("acme", "broken").await?.expect("kept");
    assert_eq!(waiting.state, OperationState::AwaitingApproval);
    assert_eq!(waiting.attempt, 1, "the failed attempt stays counted");
    assert_eq!(waiting.approval_id.as_deref(), Some("apr_1"));
    assert_eq!(waiting.errors.len(), 1, "the old attempt's error is kept");

    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    let decided = store
        .decide(DecideRequest {
            id: "apr_1",
            approver: &manager,
            verdict: Verdict::Approve,
            reason: "the customer called",
            now_ms: T0 + 20_000,
        })
        .await?;
    let Decided::Applied(approved) = decided else {
        panic!("expected the approval to be applied, got {decided:?}");
    };
    assert_eq!(store.list_approved(10).await?, vec![approved.clone()]);
    assert_eq!(
        store
            .claim(claim("acme", "broken", "h-broken", T0 + 30_000, None))
            .await?,
        Claim::Acquired {
            attempt: 2,
            approved: Some(approved)
        }
    );
    assert!(matches!(
        store
            .claim(claim("acme", "broken", "h-broken", T0 + 30_001, None))
            .await?,
        Claim::Existing(ref record) if record.state == OperationState::Processing
    ));
    assert!(matches!(
        store.claim(claim("acme", "done", "h-done", T0 + 30_000, None)).await?,
        Claim::Existing(ref record) if record.state == OperationState::Succeeded
    ));

    let entry = AuditEntry {
        kind: AuditKind::Call,
        tenant: "acme".into(),
        run_id: "run-1".into(),
        call_id: "call_9".into(),
        tool: "issue_refund".into(),
        actor: "agent".into(),
        arguments: r#"{"amount":"8000.00"}"#.into(),
        attempts: 0,
        duration_ms: 3,
        outcome: "awaiting_approval".into(),
        error_kind: None,
        replayed: false,
        bytes: 120,
        key: Some("broken".into()),
        approval_id: Some("apr_1".into()),
        reason: None,
        at_ms: T0 + 10_000,
    };
    let seq = store.append_audit(&entry).await?;
    let read = store
        .audit(AuditQuery {
            run_id: Some("run-1"),
            ..AuditQuery::default()
        })
        .await?;
    assert_eq!(read.len(), 1);
    assert_eq!((read[0].seq, &read[0].entry), (seq, &entry));
    let touched = store
        .list_operations(OperationQuery {
            run_id: Some("run-1"),
            ..OperationQuery::default()
        })
        .await?;
    assert_eq!(
        touched.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["broken"]
    );

    // Everything old but the record now running and the unknown outcome is settled.
    assert_eq!(
        store.purge(T0 + 5_000).await?,
        1,
        "the old succeeded record"
    );
    assert!(store.get("acme", "done").await?.is_none());
    assert!(store.get("acme", "broken").await?.is_some());
    assert!(store.approval("apr_1").await?.is_some());
    assert!(store.get("globex", "lost").await?.is_some());
    store.close().await;
    Ok(())
}

/// A file the migration cannot finish (another program made a table `approvals` in it) is
/// refused, and stays at version 2 with every row: the rebuilt `operations` was rolled back
/// with the rest.
#[tokio::test]
async fn a_migration_that_fails_leaves_the_file_as_it_was() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    previous_release(&path).await;
    let mut conn = connect(&path).await;
    sqlx::raw_sql("CREATE TABLE approvals (anything TEXT)")
        .execute(&mut conn)
        .await
        .expect("a table in the way");
    conn.close().await.expect("close");
    let before = dump(&path).await;

    let opened = SqliteStore::open(&path).await;
    let err = opened.expect_err("the migration cannot create its table");
    assert!(err.to_string().contains("migrate the schema"), "{err}");
    assert_eq!(version(&path).await, 2);
    assert_eq!(dump(&path).await, before);
    let mut conn = connect(&path).await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'operations%' \
         ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .expect("the tables");
    assert_eq!(tables, ["operations"]);
    conn.close().await.expect("close");
}

/// A file of schema version 4 with outbox events and audit records: opened at version 5, its
/// events read back as they were and not maybe applied; a lost answer on the old pending one is
/// remembered; the audit trail keeps its records, admits deliveries, and never gives a number
/// twice.
#[tokio::test]
async fn a_file_of_version_4_keeps_its_events_and_audit_and_admits_deliveries()
-> Result<(), StoreError> {
    use toolgate_core::store::{AttemptError, DeliveryOutcome, EventLease, EventStatus};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    SqliteStore::options(&path)
        .migrate_to_version(4)
        .await
        .expect("a file of schema version 4");
    let mut conn = connect(&path).await;
    sqlx::raw_sql(
        r#"
INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, state,
                        attempt, lease_until_ms, result, created_ms, updated_ms)
VALUES ('acme', 'retried', 'issue_refund', 'h1', '{}', 'queued', 1, 0, '{}', 1700000000000,
        1700000000000),
       ('acme', 'dead', 'issue_refund', 'h2', '{}', 'queued', 1, 0, '{}', 1700000000000,
        1700000000001);
INSERT INTO outbox (tenant_id, idempotency_key, tool, payload, status, attempt, due_ms,
                    last_error, created_ms, updated_ms)
VALUES ('acme', 'retried', 'issue_refund', '{}', 'pending', 1, 1700000000000,
        '{"attempt":1,"kind":"unavailable","what":"503"}', 1700000000000, 1700000000000),
       ('acme', 'dead', 'issue_refund', '{}', 'dead', 3, 1700000000000,
        '{"attempt":3,"kind":"refused","what":"no"}', 1700000000001, 1700000000001);
INSERT INTO audit (seq, kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts,
                   duration_ms, outcome, replayed, bytes, at_ms)
VALUES (6, 'call', 'acme', 'run-1', 'call_1', 'issue_refund', 'agent', '{}', 1, 5, 'queued',
        0, 10, 1700000000000),
       (7, 'call', 'acme', 'run-1', 'call_2', 'issue_refund', 'agent', '{}', 1, 5, 'queued',
        0, 10, 1700000000000);
-- The last one is purged: its number is never given again.
DELETE FROM audit WHERE seq = 7;
"#,
    )
    .execute(&mut conn)
    .await
    .expect("version 4's events");
    conn.close().await.expect("close");

    let store = SqliteStore::open(&path).await?;
    assert_eq!(version(&path).await, 6);
    let events = store.list_events(Default::default()).await?;
    let read: Vec<(&str, EventStatus, u32, bool)> = events
        .iter()
        .map(|e| (e.key.as_str(), e.status, e.attempt, e.maybe_applied))
        .collect();
    assert_eq!(
        read,
        [
            ("retried", EventStatus::Pending, 1, false),
            ("dead", EventStatus::Dead, 3, false)
        ]
    );
    let leased = store
        .lease_events(EventLease {
            worker: "w1",
            tools: &["issue_refund"],
            now_ms: T0 + 10,
            lease: Duration::from_secs(30),
            limit: 10,
        })
        .await?;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].event.attempt, 2);
    let lost = AttemptError {
        attempt: 2,
        kind: "outcome_unknown".into(),
        what: "reset".into(),
    };
    let retry = DeliveryOutcome::Retry {
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
        .await?;
    assert!(event.maybe_applied, "{event:?}");
    assert_eq!(store.event("acme", "retried").await?, Some(event));

    // The audit trail keeps its record and admits deliveries, numbered after the purged one.
    let delivery = AuditEntry {
        kind: AuditKind::Delivery,
        tenant: "acme".into(),
        run_id: String::new(),
        call_id: String::new(),
        tool: "issue_refund".into(),
        actor: "w1".into(),
        arguments: "null".into(),
        attempts: 2,
        duration_ms: 0,
        outcome: "retrying".into(),
        error_kind: Some("outcome_unknown".into()),
        replayed: false,
        bytes: 0,
        key: Some("retried".into()),
        approval_id: None,
        reason: Some("reset".into()),
        at_ms: T0 + 20,
    };
    assert_eq!(store.append_audit(&delivery).await?, 8);
    let trail = store.audit(AuditQuery::default()).await?;
    let read: Vec<(i64, AuditKind)> = trail.iter().map(|r| (r.seq, r.entry.kind)).collect();
    assert_eq!(read, [(6, AuditKind::Call), (8, AuditKind::Delivery)]);
    assert_eq!(trail[1].entry, delivery);
    Ok(())
}
