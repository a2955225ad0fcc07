//! The transaction an outbox tool's body runs in
//! ([`OutboxStore::begin`](toolgate_core::store::OutboxStore::begin)): the claim, the
//! tool's rows and the event commit together or not at all.

use std::any::Any;

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgTransactionManager};
// The facade names the trait that counts a connection's transactions only as an associated
// type of `Database`.
use sqlx_core::transaction::TransactionManager;
use toolgate_core::ToolError;
use toolgate_core::store::{Begun, Claim, ClaimRequest, Commit, StoreError, StoreTransaction};

use crate::claim;
use crate::connections::{Connections, Lease};
use crate::error::store_error;
use crate::row;

/// Which store [`PgTransaction::store_name`] names.
const STORE_NAME: &str = "PostgreSQL";

/// Opens a transaction and claims `request.key` in it: an acquired claim answers the open
/// transaction, whose uncommitted record (or row lock, for a record taken again) holds every
/// concurrent claim of the key until it ends; anything else is committed and answered.
pub(crate) async fn begin(
    conns: &Connections,
    request: &ClaimRequest<'_>,
) -> Result<Begun, StoreError> {
    let mut lease = conns.lease().await.map_err(backend)?;
    let claimed = claim_in_transaction(lease.conn(), request).await;
    match claimed {
        Ok(Claim::Acquired { attempt, approved }) => Ok(Begun::Open {
            tx: Box::new(PgTransaction { lease }),
            attempt,
            approved,
        }),
        Ok(settled) => {
            let committed = PgTransactionManager::commit(lease.conn())
                .await
                .map_err(backend);
            finish(lease, committed.map(|()| Begun::Settled(settled))).await
        }
        Err(err) => finish(lease, Err(err)).await,
    }
}

/// Opens a transaction on `conn` and claims `request.key` in it.
async fn claim_in_transaction(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    PgTransactionManager::begin(conn, None)
        .await
        .map_err(backend)?;
    claim::claim_on(conn, request).await
}

/// Ends `lease` with `answer`, rolling back first the transaction still open on it (after an
/// error): the `ROLLBACK` is sent as the lease ends, and the connection is idle, not in a
/// transaction, when it is lent again.
async fn finish<T>(mut lease: Lease, answer: Result<T, StoreError>) -> Result<T, StoreError> {
    while PgTransactionManager::get_transaction_depth(lease.conn()) > 0 {
        PgTransactionManager::start_rollback(lease.conn());
    }
    lease.finish(answer).await
}

/// An open PostgreSQL transaction holding a `processing` claim, on a connection of the store's
/// own that it holds until it commits or rolls back. Dropped without either (the call was
/// cancelled), it drops its connection, and the server rolls the transaction back as the session
/// ends.
///
/// sqlx's `Transaction` borrows its connection or takes it from a pool; this one owns its lease,
/// so it begins and ends its transaction through sqlx's `TransactionManager` itself, which keeps
/// sqlx's count of the transactions open on the connection: the claim's own transactions inside
/// it become savepoints.
struct PgTransaction {
    lease: Lease,
}

#[async_trait]
impl StoreTransaction for PgTransaction {
    fn connection(&mut self) -> &mut (dyn Any + Send) {
        let conn: &mut PgConnection = self.lease.conn();
        conn
    }

    fn store_name(&self) -> &'static str {
        STORE_NAME
    }

    async fn commit(self: Box<Self>, commit: Commit<'_>) -> Result<(), StoreError> {
        let PgTransaction { mut lease } = *self;
        let committed = commit_on(lease.conn(), commit).await;
        finish(lease, committed).await
    }

    async fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        let PgTransaction { mut lease } = *self;
        let rolled_back = PgTransactionManager::rollback(lease.conn())
            .await
            .map_err(backend);
        finish(lease, rolled_back).await
    }
}

/// Settles the claim of the transaction open on `conn` as `commit` says, and commits.
/// [`StoreError::LostClaim`] when the claim was taken over: the caller rolls back.
async fn commit_on(conn: &mut PgConnection, commit: Commit<'_>) -> Result<(), StoreError> {
    let owner = commit.owner;
    let state = if commit.event.is_some() {
        "queued"
    } else {
        "succeeded"
    };
    let tool: Option<String> = sqlx::query_scalar(
        "UPDATE toolgate_operations SET state = $4, result = $5, updated_ms = $6 \
         WHERE tenant_id = $1 AND idempotency_key = $2 \
         AND state = 'processing' AND attempt = $3 RETURNING tool",
    )
    .bind(&owner.tenant)
    .bind(&owner.key)
    .bind(row::attempt(owner.attempt))
    .bind(state)
    .bind(commit.result)
    .bind(commit.now_ms)
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend)?;
    let Some(tool) = tool else {
        // Dropping `tx` rolls the body's rows back with the claim.
        return Err(StoreError::LostClaim {
            key: owner.key.clone(),
            attempt: owner.attempt,
        });
    };
    if let Some(event) = commit.event {
        // One event an operation; an earlier one under the key (a delivery owed by an
        // earlier attempt) gives way to this one, its attempt counter kept.
        sqlx::query(
            "INSERT INTO toolgate_outbox AS e (tenant_id, idempotency_key, tool, payload, \
             status, due_ms, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, 'pending', $5, $5, $5) \
             ON CONFLICT (tenant_id, idempotency_key) DO UPDATE SET tool = $3, payload = $4, \
             status = 'pending', due_ms = $5, resumed_at = e.attempt, worker = NULL, \
             last_error = NULL, result = NULL, maybe_applied = false, updated_ms = $5",
        )
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(tool)
        .bind(&event.payload)
        .bind(commit.now_ms)
        .execute(&mut *conn)
        .await
        .map_err(backend)?;
    }
    PgTransactionManager::commit(conn).await.map_err(backend)
}

/// The PostgreSQL connection inside an outbox tool's transaction
/// ([`Ctx::transaction`](toolgate_core::Ctx::transaction)): the tool's own rows written with it
/// commit with its operation record and its event, or roll back with them.
///
/// An internal error, naming the store that opened the transaction, when the dispatcher's store
/// is not a [`PostgresStore`](crate::PostgresStore).
///
/// ```no_run
/// use toolgate::prelude::*;
///
/// /// Refund an order: the refund is recorded now, and paid by the outbox worker.
/// #[tool(side_effect = "write", key = [order_id], delivery = "outbox")]
/// async fn issue_refund(ctx: &Ctx, order_id: String, amount: i64) -> Result<String, ToolError> {
///     let mut tx = ctx.transaction().await?;
///     let conn = toolgate_store_postgres::connection(&mut tx)?;
///     toolgate_store_postgres::sqlx::query("INSERT INTO refunds (order_id, amount) VALUES ($1, $2)")
///         .bind(&order_id)
///         .bind(amount)
///         .execute(conn)
///         .await
///         .map_err(|e| ToolError::internal(format!("cannot record the refund: {e}")))?;
///     drop(tx);
///     ctx.enqueue(&serde_json::json!({"order_id": order_id, "amount": amount}))?;
///     Ok(format!("refund of {amount} on {order_id} accepted"))
/// }
/// ```
pub fn connection<'a>(
    tx: &'a mut toolgate_core::outbox::Transaction<'_>,
) -> Result<&'a mut PgConnection, ToolError> {
    let store = tx.store_name();
    tx.connection::<PgConnection>().ok_or_else(|| {
        ToolError::internal(format!(
            "toolgate_store_postgres::connection was asked for the connection of a {store} \
             store's transaction"
        ))
        .with_why("the dispatcher's store is not the PostgreSQL store, so there is no PostgreSQL connection to lend")
        .with_next("use the connection function of the store the dispatcher runs on")
    })
}

/// A failed statement of the transaction in the store's words (see `error::store_error`).
fn backend(error: sqlx::Error) -> StoreError {
    store_error("run an outbox transaction", error)
}
