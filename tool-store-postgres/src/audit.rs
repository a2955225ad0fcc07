//! The audit trail, in the table `toolgate_audit`: appended one row at a time, numbered by an
//! identity column, never changed; and the listing of operations by the runs that touched them.

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use toolgate_core::store::{
    AuditEntry, AuditKind, AuditQuery, AuditRecord, AuditStore, OperationQuery, OperationRecord,
    OperationState, StoreError, Success,
};

use crate::PostgresStore;
use crate::connections::Connections;
use crate::error::store_error;
use crate::row::{self, columns, decode, decode_optional, get, json_text};
use crate::statement::{ExecuteOn, FetchOn};

/// The columns of an audit record, in the order [`record`] reads them.
macro_rules! audit_columns {
    () => {
        "seq, kind, tenant_id, run_id, call_id::text AS call_id, tool::text AS tool, \
         actor::text AS actor, arguments, attempts, duration_ms, outcome, error_kind, replayed, \
         bytes, idempotency_key, approval_id, reason::text AS reason, at_ms"
    };
}

/// The 17 columns of an audit record, as written, and their parameters from `$1`.
macro_rules! audit_insert {
    () => {
        "INSERT INTO toolgate_audit (kind, tenant_id, run_id, call_id, tool, actor, arguments, \
         attempts, duration_ms, outcome, error_kind, replayed, bytes, idempotency_key, \
         approval_id, reason, at_ms) "
    };
}

/// The values of `audit_insert!`, from `$1` to `$17`.
macro_rules! audit_values {
    () => {
        "$1, $2, $3, $4::json, $5::json, $6::json, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
         $16::json, $17"
    };
}

/// `$query` with the values of the audit entry `$entry` bound as its next 17 parameters (`$1`
/// to `$17` of [`audit_values!`] when they are the first), in a function answering
/// `Result<_, StoreError>`.
macro_rules! bind_entry {
    ($query:expr, $entry:expr) => {{
        let entry: &toolgate_core::store::AuditEntry = $entry;
        let reason = entry
            .reason
            .as_deref()
            .map(crate::row::json_text)
            .transpose()?;
        $query
            .bind(entry.kind.as_str())
            .bind(&entry.tenant)
            .bind(&entry.run_id)
            .bind(crate::row::json_text(&entry.call_id)?)
            .bind(crate::row::json_text(&entry.tool)?)
            .bind(crate::row::json_text(&entry.actor)?)
            .bind(&entry.arguments)
            .bind(i64::from(entry.attempts))
            .bind(crate::row::wide(entry.duration_ms, "duration_ms")?)
            .bind(&entry.outcome)
            .bind(&entry.error_kind)
            .bind(entry.replayed)
            .bind(crate::row::wide(entry.bytes, "bytes")?)
            .bind(&entry.key)
            .bind(&entry.approval_id)
            .bind(reason)
            .bind(entry.at_ms)
    }};
}

pub(crate) use {audit_insert, bind_entry};

/// [`AuditStore::append_audit`](toolgate_core::store::AuditStore::append_audit).
pub(crate) async fn append(conns: &Connections, entry: &AuditEntry) -> Result<i64, StoreError> {
    let query = sqlx::query_scalar(concat!(
        audit_insert!(),
        "VALUES (",
        audit_values!(),
        ") RETURNING seq"
    ));
    bind_entry!(query, entry)
        .fetch_one_on(conns)
        .await
        .map_err(fault("append an audit record"))
}

/// [`AuditStore::append_audits`](toolgate_core::store::AuditStore::append_audits): one
/// statement, whatever their number (one round trip, one commit; all of them or none). Each
/// column goes as an array; the rows are inserted in the order given, so their numbers follow it.
pub(crate) async fn append_all(
    conns: &Connections,
    entries: &[AuditEntry],
) -> Result<(), StoreError> {
    match entries {
        [] => return Ok(()),
        [entry] => return append(conns, entry).await.map(drop),
        _ => {}
    }
    let mut columns = Columns::default();
    for entry in entries {
        columns.push(entry)?;
    }
    let Columns {
        kind,
        tenant,
        run_id,
        call_id,
        tool,
        actor,
        arguments,
        attempts,
        duration_ms,
        outcome,
        error_kind,
        replayed,
        bytes,
        key,
        approval_id,
        reason,
        at_ms,
    } = columns;
    sqlx::query(concat!(
        audit_insert!(),
        "SELECT kind, tenant_id, run_id, call_id::json, tool::json, actor::json, arguments, \
         attempts, duration_ms, outcome, error_kind, replayed, bytes, idempotency_key, \
         approval_id, reason::json, at_ms \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
         $7::text[], $8::int8[], $9::int8[], $10::text[], $11::text[], $12::bool[], $13::int8[], \
         $14::text[], $15::text[], $16::text[], $17::int8[]) WITH ORDINALITY \
         AS r(kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts, duration_ms, \
         outcome, error_kind, replayed, bytes, idempotency_key, approval_id, reason, at_ms, n) \
         ORDER BY n"
    ))
    .bind(kind)
    .bind(tenant)
    .bind(run_id)
    .bind(call_id)
    .bind(tool)
    .bind(actor)
    .bind(arguments)
    .bind(attempts)
    .bind(duration_ms)
    .bind(outcome)
    .bind(error_kind)
    .bind(replayed)
    .bind(bytes)
    .bind(key)
    .bind(approval_id)
    .bind(reason)
    .bind(at_ms)
    .execute_on(conns)
    .await
    .map(drop)
    .map_err(fault("append audit records"))
}

/// Audit records as columns, for [`append_all`].
#[derive(Default)]
struct Columns<'a> {
    kind: Vec<&'static str>,
    tenant: Vec<&'a str>,
    run_id: Vec<&'a str>,
    call_id: Vec<String>,
    tool: Vec<String>,
    actor: Vec<String>,
    arguments: Vec<&'a str>,
    attempts: Vec<i64>,
    duration_ms: Vec<i64>,
    outcome: Vec<&'a str>,
    error_kind: Vec<Option<&'a str>>,
    replayed: Vec<bool>,
    bytes: Vec<i64>,
    key: Vec<Option<&'a str>>,
    approval_id: Vec<Option<&'a str>>,
    reason: Vec<Option<String>>,
    at_ms: Vec<i64>,
}

impl<'a> Columns<'a> {
    /// Adds `entry` as the last row, encoded as [`bind_entry!`] encodes one.
    fn push(&mut self, entry: &'a AuditEntry) -> Result<(), StoreError> {
        self.kind.push(entry.kind.as_str());
        self.tenant.push(&entry.tenant);
        self.run_id.push(&entry.run_id);
        self.call_id.push(json_text(&entry.call_id)?);
        self.tool.push(json_text(&entry.tool)?);
        self.actor.push(json_text(&entry.actor)?);
        self.arguments.push(&entry.arguments);
        self.attempts.push(i64::from(entry.attempts));
        self.duration_ms
            .push(row::wide(entry.duration_ms, "duration_ms")?);
        self.outcome.push(&entry.outcome);
        self.error_kind.push(entry.error_kind.as_deref());
        self.replayed.push(entry.replayed);
        self.bytes.push(row::wide(entry.bytes, "bytes")?);
        self.key.push(entry.key.as_deref());
        self.approval_id.push(entry.approval_id.as_deref());
        self.reason
            .push(entry.reason.as_deref().map(json_text).transpose()?);
        self.at_ms.push(entry.at_ms);
        Ok(())
    }
}

/// [`ClaimStore::succeed`](toolgate_core::store::ClaimStore::succeed):
/// one statement, so one round trip and one commit. The record is inserted only from the row
/// the success changed: a lost claim writes neither.
pub(crate) async fn succeed(
    conns: &Connections,
    success: Success<'_>,
    entry: &AuditEntry,
) -> Result<Option<i64>, StoreError> {
    let owner = success.owner;
    let query = sqlx::query_scalar(concat!(
        "WITH done AS (UPDATE toolgate_operations SET state = 'succeeded', result = $18, \
         updated_ms = $19 WHERE tenant_id = $20 AND idempotency_key = $21 \
         AND state = 'processing' AND attempt = $22 RETURNING 1) ",
        audit_insert!(),
        "SELECT ",
        audit_values!(),
        " FROM done RETURNING seq"
    ));
    let seq = bind_entry!(query, entry)
        .bind(success.result)
        .bind(success.now_ms)
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .fetch_optional_on(conns)
        .await
        .map_err(fault("record a success with its audit record"))?;
    match seq {
        Some(seq) => Ok(Some(seq)),
        None => Err(StoreError::LostClaim {
            key: owner.key.clone(),
            attempt: owner.attempt,
        }),
    }
}

/// [`AuditStore::audit`](toolgate_core::store::AuditStore::audit).
pub(crate) async fn read(
    conns: &Connections,
    query: &AuditQuery<'_>,
) -> Result<Vec<AuditRecord>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        audit_columns!(),
        " FROM toolgate_audit WHERE ($1::text IS NULL OR tenant_id = $1) \
         AND ($2::text IS NULL OR run_id = $2) AND ($3::text IS NULL OR idempotency_key = $3) \
         ORDER BY seq LIMIT NULLIF($4, 0)"
    ))
    .bind(query.tenant)
    .bind(query.run_id)
    .bind(query.key)
    .bind(row::limit(query.limit))
    .fetch_all_on(conns)
    .await
    .map_err(fault("read the audit trail"))?;
    rows.iter().map(record).collect()
}

/// [`OperationLog::list_operations`](toolgate_core::store::OperationLog::list_operations):
/// by run, the operations whose keys the run's audit records name.
pub(crate) async fn operations(
    conns: &Connections,
    query: &OperationQuery<'_>,
) -> Result<Vec<OperationRecord>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM toolgate_operations AS o WHERE ($1::text IS NULL OR tenant_id = $1) \
         AND ($2::text IS NULL OR state = $2) \
         AND ($3::text IS NULL OR EXISTS (SELECT FROM toolgate_audit AS a \
         WHERE a.run_id = $3 AND a.tenant_id = o.tenant_id \
         AND a.idempotency_key = o.idempotency_key)) \
         ORDER BY created_ms, tenant_id, idempotency_key LIMIT NULLIF($4, 0)"
    ))
    .bind(query.tenant)
    .bind(query.state.map(OperationState::as_str))
    .bind(query.run_id)
    .bind(row::limit(query.limit))
    .fetch_all_on(conns)
    .await
    .map_err(fault("list operations"))?;
    rows.iter().map(row::record).collect()
}

/// The audit record in `row`, selected with `audit_columns!`.
fn record(row: &PgRow) -> Result<AuditRecord, StoreError> {
    let kind: String = get(row, "kind")?;
    Ok(AuditRecord {
        seq: get(row, "seq")?,
        entry: AuditEntry {
            kind: AuditKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown audit kind {kind:?}")))?,
            tenant: get(row, "tenant_id")?,
            run_id: get(row, "run_id")?,
            call_id: decode(row, "call_id")?,
            tool: decode(row, "tool")?,
            actor: decode(row, "actor")?,
            arguments: get(row, "arguments")?,
            attempts: row::count(get(row, "attempts")?, "attempts")?,
            duration_ms: unsigned(get(row, "duration_ms")?, "duration_ms")?,
            outcome: get(row, "outcome")?,
            error_kind: get(row, "error_kind")?,
            replayed: get(row, "replayed")?,
            bytes: unsigned(get(row, "bytes")?, "bytes")?,
            key: get(row, "idempotency_key")?,
            approval_id: get(row, "approval_id")?,
            reason: decode_optional(row, "reason")?,
            at_ms: get(row, "at_ms")?,
        },
    })
}

/// A stored `BIGINT` that must not be negative.
fn unsigned(value: i64, column: &str) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("{column} {value} is out of range")))
}

/// A failed statement while the store was `doing` something to the audit trail.
fn fault(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| store_error(doing, error)
}

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        append(&self.conns, entry).await
    }

    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        append_all(&self.conns, entries).await
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        read(&self.conns, &query).await
    }
}
