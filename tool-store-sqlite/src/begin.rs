//! The transaction an outbox tool's body runs in: the claim made inside it, the tool's rows
//! written with its connection, and the commit that stores the operation's outcome and its
//! event with them, or the rollback that leaves nothing.

use std::any::Any;

use async_trait::async_trait;
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use toolgate_core::ToolError;
use toolgate_core::store::{Begun, Claim, ClaimRequest, Commit, StoreError, StoreTransaction};

use crate::error::backend;
use crate::{claim, steps};

/// The name [`StoreTransaction::store_name`] gives.
const STORE_NAME: &str = "SQLite";

/// Opens an immediate transaction on the writer and claims `request.key` in it (see
/// [`OutboxStore::begin`](toolgate_core::store::OutboxStore::begin)). An acquired claim
/// keeps the transaction, and with it the store's one writer, open until the tool's body ends.
pub(crate) async fn begin(
    writer: &SqlitePool,
    request: &ClaimRequest<'_>,
) -> Result<Begun, StoreError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin an outbox transaction"))?;
    match claim::claim_on(&mut tx, request).await? {
        Claim::Acquired { attempt, approved } => Ok(Begun::Open {
            tx: Box::new(SqliteTransaction { tx }),
            attempt,
            approved,
        }),
        settled => {
            tx.commit().await.map_err(backend("commit a claim"))?;
            Ok(Begun::Settled(settled))
        }
    }
}

/// An open transaction of the SQLite store, holding its writer.
struct SqliteTransaction {
    tx: sqlx::Transaction<'static, Sqlite>,
}

#[async_trait]
impl StoreTransaction for SqliteTransaction {
    fn connection(&mut self) -> &mut (dyn Any + Send) {
        let conn: &mut SqliteConnection = &mut self.tx;
        conn
    }

    fn store_name(&self) -> &'static str {
        STORE_NAME
    }

    async fn commit(self: Box<Self>, commit: Commit<'_>) -> Result<(), StoreError> {
        let mut tx = self.tx;
        let owner = commit.owner;
        let state = if commit.event.is_some() {
            "queued"
        } else {
            "succeeded"
        };
        let tool: Option<String> = sqlx::query_scalar(
            "UPDATE operations SET state = ?1, result = ?2, updated_ms = ?3 \
             WHERE tenant_id = ?4 AND idempotency_key = ?5 \
               AND state = 'processing' AND attempt = ?6 \
             RETURNING tool",
        )
        .bind(state)
        .bind(commit.result)
        .bind(commit.now_ms)
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(i64::from(owner.attempt))
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("record an outbox operation's outcome"))?;
        // Dropping `tx` on an error below rolls everything back.
        let tool = tool.ok_or_else(|| steps::lost(owner))?;
        if let Some(event) = commit.event {
            insert_event(
                &mut tx,
                &owner.tenant,
                &owner.key,
                &tool,
                &event.payload,
                commit.now_ms,
            )
            .await?;
        }
        tx.commit()
            .await
            .map_err(backend("commit an outbox transaction"))
    }

    async fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        self.tx
            .rollback()
            .await
            .map_err(backend("roll back an outbox transaction"))
    }
}

/// The SQLite connection inside the transaction an outbox tool's body runs in: the tool writes
/// its own rows with it, and they commit with the operation's record and its event, or not at
/// all.
///
/// Fails with an internal error when the dispatcher's store is not the SQLite store (the error
/// names the store that is).
///
/// ```no_run
/// use toolgate::prelude::*;
///
/// /// Refund an order: the refund request is recorded here, and a worker pays it.
/// #[tool(side_effect = "write", key = [order_id], delivery = "outbox")]
/// async fn issue_refund(ctx: &Ctx, order_id: String, amount: u32) -> Result<String, ToolError> {
///     let mut tx = ctx.transaction().await?;
///     let conn = toolgate_store_sqlite::connection(&mut tx)?;
///     sqlx::query("INSERT INTO refund_requests (order_id, amount) VALUES (?1, ?2)")
///         .bind(&order_id)
///         .bind(amount)
///         .execute(&mut *conn)
///         .await
///         .map_err(|err| ToolError::internal(format!("could not record the refund: {err}")))?;
///     ctx.enqueue(&serde_json::json!({"order_id": order_id, "amount": amount}))?;
///     Ok(format!("refund of {amount} on {order_id} accepted"))
/// }
/// # fn main() {}
/// ```
pub fn connection<'a>(
    tx: &'a mut toolgate_core::outbox::Transaction<'_>,
) -> Result<&'a mut SqliteConnection, ToolError> {
    let open = tx.store_name();
    tx.connection::<SqliteConnection>().ok_or_else(|| {
        ToolError::internal(format!(
            "the tool asked for the SQLite connection of its transaction, but the transaction \
             is the {open} store's"
        ))
    })
}

/// Inserts the event of the operation `(tenant, key)` of `tool`, `pending`, due at `now_ms`, on
/// `conn` (the outbox tool's transaction).
async fn insert_event(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &str,
    tool: &str,
    payload: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO outbox (tenant_id, idempotency_key, tool, payload, status, attempt, \
                             due_ms, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5)",
    )
    .bind(tenant)
    .bind(key)
    .bind(tool)
    .bind(payload)
    .bind(now_ms)
    .execute(&mut *conn)
    .await
    .map_err(backend("enqueue an outbox event"))?;
    Ok(())
}
