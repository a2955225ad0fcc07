//! A write's claim that begins its turn
//! ([`RunLedger::begin_turn_and_claim`](toolgate_core::store::RunLedger::begin_turn_and_claim)):
//! one statement that counts the turn (the function `toolgate_count_turn`, migration 0008) and,
//! when its grant lets the write claim
//! ([`grant_lets_claim`](toolgate_core::store::grant_lets_claim)), inserts the key's record or
//! reads the record under it. One round trip and one commit for the turn of a lone write's
//! claim, where `begin_turn` and `claim` take two of each.
//!
//! The statement commits as a claim does, waiting for the disk. A key that holds a record is
//! then settled as [`claim`](crate::claim) settles one it collided with (a replay, a conflict, a
//! takeover under the row lock). A claim that asks for an approval (its record and its approval
//! are inserted together) begins its turn first, then claims: two statements
//! ([`begin_turn_then_claim`](toolgate_core::store::begin_turn_then_claim)).

use sqlx::postgres::PgConnection;
use toolgate_core::store::{ClaimRequest, StoreError, TurnClaim, TurnRequest};

use crate::claim::{self, Inserted};
use crate::connections::Connections;
use crate::error::store_error;
use crate::grant::grant_of;
use crate::row::{self, columns, get};

/// Whether the turn and the claim go in one statement: a claim of one write that asks for no
/// approval (one with an approval inserts its record and the approval together).
pub(crate) fn in_one_statement(turn: &TurnRequest<'_>, request: &ClaimRequest<'_>) -> bool {
    request.approval.is_none() && turn.tools == [(request.tool, 1)]
}

/// [`RunLedger::begin_turn_and_claim`](toolgate_core::store::RunLedger::begin_turn_and_claim)
/// in one statement, for a claim [`in_one_statement`] takes.
pub(crate) async fn begin_turn_and_claim(
    conns: &Connections,
    turn: &TurnRequest<'_>,
    request: &ClaimRequest<'_>,
) -> Result<TurnClaim, StoreError> {
    let mut lease = conns.lease().await.map_err(backend)?;
    let claimed = begin_turn_and_claim_on(lease.conn(), turn, request).await;
    lease.finish(claimed).await
}

async fn begin_turn_and_claim_on(
    conn: &mut PgConnection,
    turn: &TurnRequest<'_>,
    request: &ClaimRequest<'_>,
) -> Result<TurnClaim, StoreError> {
    let limits = turn.limits;
    // `turn` and `go` are materialized: the function runs once, before the insert that reads
    // its answer. The insert skips a key that exists; the record read is one that was there
    // before the statement (its snapshot cannot see its own insert).
    let row = row::bind_new_record(
        sqlx::query(concat!(
            "WITH turn AS MATERIALIZED (SELECT * FROM toolgate_count_turn(\
             $1, $8, ARRAY[$3::text], ARRAY[1::bigint], $9, $10, $11, $7)), \
             go AS MATERIALIZED (SELECT outcome = 'admitted' AND granted[1] >= 1 \
             AND NOT ($4 = ANY (failed_hashes)) AS go FROM turn), \
             inserted AS (",
            "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
             arguments, state, attempt, lease_until_ms, created_ms, updated_ms) \
             SELECT $1, $2, $3, $4, $5, 'processing', 1, $6, $7, $7 FROM go WHERE go.go \
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING 1) \
             SELECT turn.outcome, turn.step, turn.used, turn.aborted_kind, turn.aborted_reason, \
             turn.granted, turn.failed_tools, turn.failed_hashes, go.go, \
             EXISTS (SELECT FROM inserted) AS acquired, ",
            columns!(),
            " FROM turn CROSS JOIN go LEFT JOIN toolgate_operations \
             ON tenant_id = $1 AND idempotency_key = $2"
        )),
        request,
    )
    .bind(turn.run.run_id)
    .bind(limits.max_steps.map(i64::from))
    .bind(limits.max_tool_calls.map(i64::from))
    .bind(limits.retry_budget.map(i64::from))
    .fetch_one(&mut *conn)
    .await
    .map_err(backend)?;
    let grant = grant_of(&row, limits)?;
    if !get::<bool>(&row, "go")? {
        return Ok(TurnClaim { grant, claim: None });
    }
    let first = if get(&row, "acquired")? {
        Inserted::Acquired
    } else if get::<Option<String>>(&row, "tenant_id")?.is_some() {
        Inserted::Existing(row::record(&row)?)
    } else {
        Inserted::Unseen
    };
    let claim = claim::claim_after(conn, request, Some(first)).await?;
    Ok(TurnClaim {
        grant,
        claim: Some(claim),
    })
}

fn backend(error: sqlx::Error) -> StoreError {
    store_error("begin a turn and claim a key", error)
}
