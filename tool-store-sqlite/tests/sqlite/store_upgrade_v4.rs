//! A file of schema version 3 (operations with approvals, the run ledger, the audit trail)
//! opened by this release (version 4 added the outbox and the step journal, version 5 the mark of
//! a delivery that may have been applied and more audit kinds): every row kept byte for byte,
//! and the new states, events and steps working on its records.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use toolgate_core::store::StepRequest;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    AttemptError, Begun, Claim, ClaimRequest, ClaimToken, Commit, EventStatus, NewEvent,
    OperationState, PartialOutcome, StepOutcome, StepStart, StoreError,
};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

/// Rows in every state of version 3, an approval of each kind of waiting, audit records and a
/// run, with texts that must come back unchanged.
const V3_ROWS: &str = r#"
INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, state,
                        attempt, lease_until_ms, result, errors, reconcile_tries,
                        created_ms, updated_ms, approval_id)
VALUES
 ('acme', 'running', 'issue_refund', 'h-run', '{"amount":"20.00","note":"«vite» ✓"}',
  'processing', 1, 1700000030000, NULL, '[]', 0, 1700000000000, 1700000000000, NULL),
 ('acme', 'done', 'issue_refund', 'h-done', '{"amount":"10.00"}',
  'succeeded', 2, 1700000030000, '{"refund_id":"re_1","memo":"a\nb"}',
  '[{"attempt":1,"kind":"provider_unavailable","what":"HTTP 503"}]', 0,
  1700000000000, 1700000001000, NULL),
 ('acme', 'broken', 'update_crm_and_notify', 'h-broken', '{"customer":"C-1"}',
  'failed', 1, 1700000030000, NULL,
  '[{"attempt":1,"kind":"refused","what":"over the balance"}]', 0,
  1700000000000, 1700000002000, NULL),
 ('globex', 'lost', 'cancel_order', 'h-lost', '{"order_id":"ORD-7"}',
  'outcome_unknown', 3, 1700000030000, NULL,
  '[{"attempt":3,"kind":"outcome_unknown","what":"timed out after sending"}]', 2,
  1700000000000, 1700000003000, NULL),
 ('acme', 'waiting', 'issue_refund', 'h-wait', '{"amount":"8000.00"}',
  'awaiting_approval', 0, 0, NULL, '[]', 0, 1700000000000, 1700000004000, 'apr_1'),
 ('acme', 'refused', 'issue_refund', 'h-ref', '{"amount":"9000.00"}',
  'rejected', 0, 0, NULL, '[]', 0, 1700000000000, 1700000005000, 'apr_2');
INSERT INTO approvals (id, tenant_id, idempotency_key, tool, request_hash, policy_hash,
                       arguments, amount, threshold, requester, run_id, call_id,
                       approver_permission, created_ms, expires_ms, status, decisions)
VALUES
 ('apr_1', 'acme', 'waiting', 'issue_refund', 'h-wait', 'p1', '{"amount":"8000.00"}',
  '8000.00', '5000', '{"user":"agent","permissions":["refund:create"]}', 'run-1', 'call_1',
  'refund:approve', 1700000000000, 1700003600000, 'pending', '[]'),
 ('apr_2', 'acme', 'refused', 'issue_refund', 'h-ref', 'p1', '{"amount":"9000.00"}',
  '9000.00', '5000', '{"user":"agent","permissions":["refund:create"]}', 'run-1', 'call_2',
  'refund:approve', 1700000000000, 1700003600000, 'rejected',
  '[{"verdict":"reject","by":"manager","at_ms":1700000005000,"reason":"«non»"}]');
INSERT INTO audit (kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts,
                   duration_ms, outcome, error_kind, replayed, bytes, idempotency_key,
                   approval_id, reason, at_ms)
VALUES
 ('call', 'acme', 'run-1', 'call_1', 'issue_refund', 'agent', '{"amount":"8000.00"}', 0, 3,
  'awaiting_approval', NULL, 0, 120, 'waiting', 'apr_1', NULL, 1700000000000),
 ('decision', 'acme', 'run-1', 'call_2', 'issue_refund', 'manager', '{}', 0, 0,
  'rejected', NULL, 0, 0, 'refused', 'apr_2', '«non»', 1700000005000);
INSERT INTO runs (tenant_id, run_id, steps, tool_calls, aborted_kind, aborted_reason, updated_ms)
VALUES ('acme', 'run-1', 3, 5, NULL, NULL, 1700000004000);
INSERT INTO run_attempts (tenant_id, run_id, tool, attempts)
VALUES ('acme', 'run-1', 'issue_refund', 2);
INSERT INTO run_failures (tenant_id, run_id, tool, request_hash)
VALUES ('acme', 'run-1', 'issue_refund', 'h-broken');
"#;

/// A plain connection to `path`, as another program would open it.
async fn connect(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("a plain connection")
}

/// Every row of version 3's tables, each column as its SQL literal (`quote`), so two dumps are
/// equal only when every value and its type are.
async fn dump(path: &Path) -> Vec<String> {
    let mut conn = connect(path).await;
    let mut rows = Vec::new();
    for table in [
        "operations",
        "approvals",
        "audit",
        "runs",
        "run_attempts",
        "run_failures",
    ] {
        let columns: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        )))
        .fetch_all(&mut conn)
        .await
        .expect("the columns");
        let quoted: Vec<String> = columns.iter().map(|c| format!("quote({c})")).collect();
        let sql = format!(
            "SELECT '{table}:' || {} FROM {table} ORDER BY 1",
            quoted.join(" || ',' || ")
        );
        let table_rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut conn)
            .await
            .expect("the rows");
        rows.extend(table_rows);
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

/// A file of version 3 at `path`, holding [`V3_ROWS`].
async fn version_3(path: &Path) {
    SqliteStore::options(path)
        .migrate_to_version(3)
        .await
        .expect("a file of schema version 3");
    let mut conn = connect(path).await;
    sqlx::raw_sql(V3_ROWS)
        .execute(&mut conn)
        .await
        .expect("version 3's rows");
    // Version 3 knows nothing of the outbox: its CHECK refuses the new state.
    let refused = sqlx::raw_sql(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms) \
         VALUES ('acme', 'x', 't', 'h', '{}', 'queued', 1, 0, 0, 0)",
    )
    .execute(&mut conn)
    .await;
    assert!(refused.is_err(), "version 3 has no state queued");
    conn.close().await.expect("close");
    assert_eq!(version(path).await, 3);
}

fn request<'a>(key: &'a str, tool: &'a str, hash: &'a str, now_ms: i64) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool,
        request_hash: hash,
        unkeyed: None,
        arguments: "{}",
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

fn holder(key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: "acme".into(),
        key: key.into(),
        attempt,
    }
}

/// Every row of version 3 is kept byte for byte, opening again changes nothing, and the file
/// is sound.
#[tokio::test]
async fn a_version_3_file_keeps_every_row() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    version_3(&path).await;
    let before = dump(&path).await;
    assert_eq!(before.len(), 6 + 2 + 2 + 1 + 1 + 1, "{before:#?}");

    let store = SqliteStore::open(&path).await?;
    let waiting = store.get("acme", "waiting").await?.expect("kept");
    assert_eq!(
        (
            waiting.state,
            waiting.attempt,
            waiting.approval_id.as_deref()
        ),
        (OperationState::AwaitingApproval, 0, Some("apr_1"))
    );
    let refused = store.get("acme", "refused").await?.expect("kept");
    assert_eq!(refused.state, OperationState::Rejected);
    assert_eq!(
        store
            .approval("apr_2")
            .await?
            .expect("kept")
            .decisions
            .len(),
        1
    );
    store.close().await;
    assert_eq!(version(&path).await, 6);
    assert_eq!(dump(&path).await, before);

    let store = SqliteStore::open(&path).await?;
    store.close().await;
    assert_eq!(version(&path).await, 6);
    assert_eq!(dump(&path).await, before);
    let mut conn = connect(&path).await;
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .expect("integrity check");
    assert_eq!(integrity, "ok");
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .expect("the indexes");
    for index in [
        "operations_by_age",
        "operations_by_state_age",
        "outbox_by_status_due",
    ] {
        assert!(indexes.iter().any(|i| i == index), "{index}: {indexes:?}");
    }
    conn.close().await.expect("close");
    Ok(())
}

/// On the upgraded file an outbox call is queued with its event, and an old `failed` record is
/// claimed again, journals its steps and ends `partial`.
#[tokio::test]
async fn the_outbox_and_the_step_journal_work_on_an_upgraded_file() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    version_3(&path).await;
    let store = SqliteStore::open(&path).await?;

    let Begun::Open { tx, attempt, .. } = store
        .begin(request("new", "issue_refund", "h-new", T0 + 10_000))
        .await?
    else {
        panic!("a new key opens a transaction");
    };
    tx.commit(Commit {
        owner: &holder("new", attempt),
        result: r#"{"accepted":true}"#,
        event: Some(&NewEvent {
            payload: r#"{"amount":"5.00"}"#.into(),
        }),
        now_ms: T0 + 10_001,
    })
    .await?;
    assert_eq!(
        store.get("acme", "new").await?.expect("committed").state,
        OperationState::Queued
    );
    let event = store.event("acme", "new").await?.expect("enqueued");
    assert_eq!(event.status, EventStatus::Pending);

    let claimed = store
        .claim(request(
            "broken",
            "update_crm_and_notify",
            "h-broken",
            T0 + 20_000,
        ))
        .await?;
    assert!(
        matches!(claimed, Claim::Acquired { attempt: 2, .. }),
        "{claimed:?}"
    );
    let owner = holder("broken", 2);
    for name in ["crm", "notify"] {
        assert_eq!(
            store
                .begin_step(StepRequest {
                    owner: &owner,
                    name,
                    now_ms: T0 + 20_001
                })
                .await?,
            StepStart::Run
        );
    }
    store
        .finish_step(
            StepRequest {
                owner: &owner,
                name: "crm",
                now_ms: T0 + 20_002,
            },
            StepOutcome::Succeeded("1"),
        )
        .await?;
    let failure = AttemptError {
        attempt: 2,
        kind: "provider_unavailable".into(),
        what: "HTTP 503".into(),
    };
    store
        .finish_step(
            StepRequest {
                owner: &owner,
                name: "notify",
                now_ms: T0 + 20_003,
            },
            StepOutcome::Failed(&failure),
        )
        .await?;
    store
        .partial(PartialOutcome {
            owner: &owner,
            report: r#"{"steps":[]}"#,
            error: &failure,
            now_ms: T0 + 20_004,
        })
        .await?;
    let partial = store.get("acme", "broken").await?.expect("kept");
    assert_eq!(partial.state, OperationState::Partial);
    assert_eq!(partial.errors.len(), 2, "the old attempt's error is kept");
    assert_eq!(store.steps("acme", "broken").await?.len(), 2);
    store.close().await;
    Ok(())
}
