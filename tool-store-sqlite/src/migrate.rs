//! The schema, versioned by SQLite's `user_version` and migrated on open.
//!
//! `MIGRATIONS[i]` brings a file from version `i` to `i + 1`. A shipped migration is never
//! edited: a change is a new one at the end.

use sqlx::{AssertSqlSafe, SqlitePool};
use toolgate_core::store::StoreError;

use crate::error::backend;

/// `PRAGMA application_id` of a toolgate operation store: "TGOP" in ASCII.
const APPLICATION_ID: i64 = 0x5447_4F50;

/// Version 1: one row an operation, keyed by tenant and key.
const V1: &str = r#"
CREATE TABLE operations (
    tenant_id       TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown')),
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    lease_until_ms  INTEGER NOT NULL,
    result          TEXT,
    -- Every attempt's error: a JSON array of toolgate_core's AttemptError.
    errors          TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    reconcile_tries INTEGER NOT NULL DEFAULT 0 CHECK (reconcile_tries >= 0),
    created_ms      INTEGER NOT NULL,
    updated_ms      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
) STRICT;

-- list_unknown (oldest first, in this exact order) and purge (terminal records by age).
-- expire_leases finds its rows through it too (state = 'processing'): only the calls in flight,
-- and the claims of a crashed worker until they expire, are in that state.
CREATE INDEX operations_by_state_age
    ON operations (state, updated_ms, tenant_id, idempotency_key);
"#;

/// Version 2: the run ledger. One row a run (its counters and its abort), one a tool a run has
/// called (its attempts), one a call that failed in a run; a run's rows go with it.
const V2: &str = r#"
CREATE TABLE runs (
    tenant_id      TEXT    NOT NULL,
    run_id         TEXT    NOT NULL,
    steps          INTEGER NOT NULL DEFAULT 0 CHECK (steps BETWEEN 0 AND 4294967295),
    tool_calls     INTEGER NOT NULL DEFAULT 0 CHECK (tool_calls BETWEEN 0 AND 4294967295),
    -- Why the run stopped (the error kind's name and the reason), both or neither.
    aborted_kind   TEXT,
    aborted_reason TEXT,
    updated_ms     INTEGER NOT NULL,
    CHECK ((aborted_kind IS NULL) = (aborted_reason IS NULL)),
    PRIMARY KEY (tenant_id, run_id)
) STRICT;

-- purge: runs by age.
CREATE INDEX runs_by_age ON runs (updated_ms);

CREATE TABLE run_attempts (
    tenant_id TEXT    NOT NULL,
    run_id    TEXT    NOT NULL,
    tool      TEXT    NOT NULL,
    attempts  INTEGER NOT NULL CHECK (attempts BETWEEN 0 AND 4294967295),
    PRIMARY KEY (tenant_id, run_id, tool),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id) ON DELETE CASCADE
) STRICT;

CREATE TABLE run_failures (
    tenant_id    TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    tool         TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    PRIMARY KEY (tenant_id, run_id, tool, request_hash),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id) ON DELETE CASCADE
) STRICT;
"#;

/// Version 3: approvals and the audit trail. `operations` admits the states
/// `awaiting_approval` (attempt 0 while a new operation waits) and `rejected`, and names its
/// latest approval; SQLite cannot alter a CHECK, so the table is rebuilt, every row copied as
/// it is, inside the migration's transaction. `approvals` holds one row an approval (the
/// requester and the decisions as JSON text), `audit` one row a call or decision, numbered in
/// the order appended (AUTOINCREMENT: a number is never given twice, even after a purge).
const V3: &str = r#"
CREATE TABLE operations_v3 (
    tenant_id       TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown',
                         'awaiting_approval', 'rejected')),
    -- 0 only before the first run: a new operation awaiting its approval, or rejected so.
    attempt         INTEGER NOT NULL
        CHECK (attempt >= 1 OR (attempt = 0 AND state IN ('awaiting_approval', 'rejected'))),
    lease_until_ms  INTEGER NOT NULL,
    result          TEXT,
    -- Every attempt's error: a JSON array of toolgate_core's AttemptError.
    errors          TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    reconcile_tries INTEGER NOT NULL DEFAULT 0 CHECK (reconcile_tries >= 0),
    created_ms      INTEGER NOT NULL,
    updated_ms      INTEGER NOT NULL,
    -- The operation's latest approval (approvals.id), when it needed one.
    approval_id     TEXT
        CHECK (state <> 'awaiting_approval' OR approval_id IS NOT NULL),
    PRIMARY KEY (tenant_id, idempotency_key)
) STRICT;

INSERT INTO operations_v3 (tenant_id, idempotency_key, tool, request_hash, arguments, state,
                           attempt, lease_until_ms, result, errors, reconcile_tries,
                           created_ms, updated_ms)
    SELECT tenant_id, idempotency_key, tool, request_hash, arguments, state,
           attempt, lease_until_ms, result, errors, reconcile_tries, created_ms, updated_ms
    FROM operations;

DROP TABLE operations;
ALTER TABLE operations_v3 RENAME TO operations;

-- As in version 1: list_unknown, purge and expire_leases.
CREATE INDEX operations_by_state_age
    ON operations (state, updated_ms, tenant_id, idempotency_key);
-- list_operations, oldest first.
CREATE INDEX operations_by_age ON operations (created_ms, tenant_id, idempotency_key);

CREATE TABLE approvals (
    id                  TEXT    NOT NULL PRIMARY KEY,
    tenant_id           TEXT    NOT NULL,
    idempotency_key     TEXT    NOT NULL,
    tool                TEXT    NOT NULL,
    request_hash        TEXT    NOT NULL,
    policy_hash         TEXT    NOT NULL,
    arguments           TEXT    NOT NULL,
    amount              TEXT    NOT NULL,
    threshold           TEXT    NOT NULL,
    -- toolgate_core's Requester as a JSON object.
    requester           TEXT    NOT NULL
        CHECK (json_valid(requester) AND json_type(requester) = 'object'),
    run_id              TEXT    NOT NULL,
    call_id             TEXT    NOT NULL,
    approver_permission TEXT    NOT NULL,
    created_ms          INTEGER NOT NULL,
    expires_ms          INTEGER NOT NULL,
    status              TEXT    NOT NULL
        CHECK (status IN ('pending', 'approved', 'rejected')),
    -- Every decision, in order: a JSON array of toolgate_core's Decision.
    decisions           TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(decisions) AND json_type(decisions) = 'array')
) STRICT;

-- list_approved, expire_approvals and list_approvals by status, oldest first.
CREATE INDEX approvals_by_status ON approvals (status, created_ms, id);
-- list_approvals by tenant, oldest first. (purge reads every approval to find those whose
-- operation is gone: only the calls over a threshold have one, and they go with their
-- operations.)
CREATE INDEX approvals_by_tenant ON approvals (tenant_id, created_ms, id);

CREATE TABLE audit (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT    NOT NULL CHECK (kind IN ('call', 'decision')),
    tenant_id       TEXT    NOT NULL,
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    actor           TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    attempts        INTEGER NOT NULL CHECK (attempts BETWEEN 0 AND 4294967295),
    duration_ms     INTEGER NOT NULL CHECK (duration_ms >= 0),
    outcome         TEXT    NOT NULL,
    error_kind      TEXT,
    replayed        INTEGER NOT NULL CHECK (replayed IN (0, 1)),
    bytes           INTEGER NOT NULL CHECK (bytes >= 0),
    idempotency_key TEXT,
    approval_id     TEXT,
    reason          TEXT,
    at_ms           INTEGER NOT NULL
) STRICT;

-- audit and list_operations by run; audit by operation; purge by age.
CREATE INDEX audit_by_run ON audit (run_id, seq);
CREATE INDEX audit_by_key ON audit (idempotency_key, seq);
CREATE INDEX audit_by_age ON audit (at_ms);
"#;

/// Version 4: the transactional outbox and the step journal. `operations` admits the states
/// `queued` (an outbox operation whose delivery is owed) and `partial` (some steps succeeded, a
/// later one failed); the table is rebuilt as in version 3, every row copied as it is. `outbox`
/// holds an operation's one event (keyed as its operation; rows of purged operations go with
/// them), `steps` the journal of an operation's steps.
const V4: &str = r#"
CREATE TABLE operations_v4 (
    tenant_id       TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('processing', 'succeeded', 'failed', 'outcome_unknown',
                         'awaiting_approval', 'rejected', 'queued', 'partial')),
    -- 0 only before the first run: a new operation awaiting its approval, or rejected so.
    attempt         INTEGER NOT NULL
        CHECK (attempt >= 1 OR (attempt = 0 AND state IN ('awaiting_approval', 'rejected'))),
    lease_until_ms  INTEGER NOT NULL,
    result          TEXT,
    -- Every attempt's error: a JSON array of toolgate_core's AttemptError.
    errors          TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    reconcile_tries INTEGER NOT NULL DEFAULT 0 CHECK (reconcile_tries >= 0),
    created_ms      INTEGER NOT NULL,
    updated_ms      INTEGER NOT NULL,
    -- The operation's latest approval (approvals.id), when it needed one.
    approval_id     TEXT
        CHECK (state <> 'awaiting_approval' OR approval_id IS NOT NULL),
    PRIMARY KEY (tenant_id, idempotency_key)
) STRICT;

INSERT INTO operations_v4 (tenant_id, idempotency_key, tool, request_hash, arguments, state,
                           attempt, lease_until_ms, result, errors, reconcile_tries,
                           created_ms, updated_ms, approval_id)
    SELECT tenant_id, idempotency_key, tool, request_hash, arguments, state,
           attempt, lease_until_ms, result, errors, reconcile_tries, created_ms, updated_ms,
           approval_id
    FROM operations;

DROP TABLE operations;
ALTER TABLE operations_v4 RENAME TO operations;

-- As in version 3: list_unknown, purge and expire_leases; list_operations, oldest first.
CREATE INDEX operations_by_state_age
    ON operations (state, updated_ms, tenant_id, idempotency_key);
CREATE INDEX operations_by_age ON operations (created_ms, tenant_id, idempotency_key);

-- One event an outbox operation, under its operation's tenant and key.
CREATE TABLE outbox (
    tenant_id       TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    -- What the worker delivers: JSON text.
    payload         TEXT    NOT NULL CHECK (json_valid(payload)),
    status          TEXT    NOT NULL
        CHECK (status IN ('pending', 'leased', 'delivered', 'dead', 'unknown')),
    attempt         INTEGER NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
    resumed_at      INTEGER NOT NULL DEFAULT 0 CHECK (resumed_at BETWEEN 0 AND attempt),
    lease_until_ms  INTEGER NOT NULL DEFAULT 0,
    due_ms          INTEGER NOT NULL,
    worker          TEXT,
    -- The last delivery error: toolgate_core's AttemptError as a JSON object.
    last_error      TEXT
        CHECK (last_error IS NULL OR (json_valid(last_error)
                                      AND json_type(last_error) = 'object')),
    result          TEXT,
    created_ms      INTEGER NOT NULL,
    updated_ms      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
) STRICT;

-- lease_events: due pending events and leased ones whose lease ended, oldest first.
CREATE INDEX outbox_by_status_due ON outbox (status, due_ms, created_ms);
-- list_events, oldest first.
CREATE INDEX outbox_by_age ON outbox (created_ms, tenant_id, idempotency_key);

-- The step journal: one row a step of an operation.
CREATE TABLE steps (
    tenant_id       TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    seq             INTEGER NOT NULL CHECK (seq BETWEEN 1 AND 4294967295),
    status          TEXT    NOT NULL CHECK (status IN ('started', 'succeeded', 'failed')),
    attempt         INTEGER NOT NULL CHECK (attempt BETWEEN 1 AND 4294967295),
    output          TEXT,
    -- The step's last error: toolgate_core's AttemptError as a JSON object.
    error           TEXT
        CHECK (error IS NULL OR (json_valid(error) AND json_type(error) = 'object')),
    updated_ms      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key, name),
    UNIQUE (tenant_id, idempotency_key, seq)
) STRICT;
"#;

/// Version 5: an outbox event remembers whether one of its deliveries may have been applied
/// (an answer lost, a lease taken over mid-delivery), so that it is never dead-lettered as
/// undelivered; events of earlier versions read as not. The audit trail admits the kinds
/// `delivery` (an outbox delivery attempt) and `operator` (an operator's action): `audit` is rebuilt as in version 3, every row copied
/// as it is and its AUTOINCREMENT counter carried over, so that no number is given twice.
const V5: &str = r#"
ALTER TABLE outbox ADD COLUMN maybe_applied INTEGER NOT NULL DEFAULT 0
    CHECK (maybe_applied IN (0, 1));

CREATE TABLE audit_v5 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT    NOT NULL CHECK (kind IN ('call', 'decision', 'delivery', 'operator')),
    tenant_id       TEXT    NOT NULL,
    run_id          TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    actor           TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,
    attempts        INTEGER NOT NULL CHECK (attempts BETWEEN 0 AND 4294967295),
    duration_ms     INTEGER NOT NULL CHECK (duration_ms >= 0),
    outcome         TEXT    NOT NULL,
    error_kind      TEXT,
    replayed        INTEGER NOT NULL CHECK (replayed IN (0, 1)),
    bytes           INTEGER NOT NULL CHECK (bytes >= 0),
    idempotency_key TEXT,
    approval_id     TEXT,
    reason          TEXT,
    at_ms           INTEGER NOT NULL
) STRICT;

INSERT INTO audit_v5 (seq, kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts,
                      duration_ms, outcome, error_kind, replayed, bytes, idempotency_key,
                      approval_id, reason, at_ms)
    SELECT seq, kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts,
           duration_ms, outcome, error_kind, replayed, bytes, idempotency_key,
           approval_id, reason, at_ms
    FROM audit;

-- The last number given, even to a record purged since.
DELETE FROM sqlite_sequence WHERE name = 'audit_v5';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'audit_v5', seq FROM sqlite_sequence WHERE name = 'audit';

DROP TABLE audit;
ALTER TABLE audit_v5 RENAME TO audit;

-- As in version 3: audit and list_operations by run; audit by operation; purge by age.
CREATE INDEX audit_by_run ON audit (run_id, seq);
CREATE INDEX audit_by_key ON audit (idempotency_key, seq);
CREATE INDEX audit_by_age ON audit (at_ms);
"#;

/// Version 6: the public keys of the issuers of operator tokens, per tenant, as JSON Web Keys
/// (never a secret).
const V6: &str = r#"
CREATE TABLE issuer_keys (
    kid         TEXT    PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    issuer      TEXT    NOT NULL,
    jwk         TEXT    NOT NULL,
    added_ms    INTEGER NOT NULL,
    seq         INTEGER NOT NULL
) STRICT;

CREATE INDEX issuer_keys_by_tenant ON issuer_keys (tenant_id, seq);
"#;

const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6];

/// The schema version this build writes.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// Brings the file to [`LATEST`], in one immediate transaction, so two stores opening the same
/// file at once migrate it once. Idempotent. Refuses a file of another program or a newer
/// version without changing it.
pub(crate) async fn migrate(writer: &SqlitePool) -> Result<(), StoreError> {
    migrate_to(writer, LATEST).await
}

/// Brings the file to version `target` (at most [`LATEST`]) as [`migrate`] does; a file at
/// `target` or later is left as it is.
pub(crate) async fn migrate_to(writer: &SqlitePool, target: i64) -> Result<(), StoreError> {
    let target = target.clamp(0, LATEST);
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin the schema migration"))?;
    let application_id: i64 = sqlx::query_scalar("PRAGMA application_id")
        .fetch_one(&mut *tx)
        .await
        .map_err(backend("read the application id"))?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .map_err(backend("read the schema version"))?;
    let from = check(application_id, version)?;
    if from >= target {
        return Ok(());
    }
    if from == 0 {
        sqlx::raw_sql(AssertSqlSafe(format!(
            "PRAGMA application_id = {APPLICATION_ID}"
        )))
        .execute(&mut *tx)
        .await
        .map_err(backend("mark the file as an operation store"))?;
    }
    let steps = MIGRATIONS.iter().enumerate().take(target as usize);
    for (done, sql) in steps.skip(from as usize) {
        sqlx::raw_sql(*sql)
            .execute(&mut *tx)
            .await
            .map_err(backend("migrate the schema"))?;
        let version = done + 1;
        sqlx::raw_sql(AssertSqlSafe(format!("PRAGMA user_version = {version}")))
            .execute(&mut *tx)
            .await
            .map_err(backend("record the schema version"))?;
    }
    tx.commit()
        .await
        .map_err(backend("commit the schema migration"))
}

/// The version to migrate from, or why this file is not ours to migrate.
fn check(application_id: i64, version: i64) -> Result<i64, StoreError> {
    match (application_id, version) {
        // A new (or empty) file.
        (0, 0) => Ok(0),
        (APPLICATION_ID, 0..=LATEST) => Ok(version),
        (APPLICATION_ID, _) => Err(StoreError::backend(format!(
            "the operation store's schema is version {version}, newer than this build knows \
             ({LATEST}): upgrade toolgate"
        ))),
        _ => Err(StoreError::backend(format!(
            "the file is not a toolgate operation store (application_id {application_id}, \
             user_version {version})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_migrates_from_zero_and_a_current_one_not_at_all() {
        assert_eq!(check(0, 0).unwrap(), 0);
        assert_eq!(check(APPLICATION_ID, LATEST).unwrap(), LATEST);
    }

    #[test]
    fn a_newer_schema_or_another_programs_file_is_refused() {
        let newer = check(APPLICATION_ID, LATEST + 1).unwrap_err().to_string();
        assert!(newer.contains("newer than this build knows"), "{newer}");
        for (application_id, version) in [(0, 3), (42, 0), (42, 1)] {
            let other = check(application_id, version).unwrap_err().to_string();
            assert!(other.contains("not a toolgate operation store"), "{other}");
        }
    }
}
