//! `issue_refund` delivered through the outbox: the refund desk's `{"delivery": "outbox"}` mode.
//!
//! The tool's body records a refund request in the shop's own table, `refund_requests`, in the
//! operation store's database and inside the store's transaction, and enqueues one event; the
//! operation record, the row and the event commit together or not at all. The model reads
//! `queued`. An [`OutboxWorker`](toolgate::outbox::OutboxWorker) with [`RefundDelivery`] then sends the
//! refund to the payment provider under the operation's key.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::prelude::*;
use toolgate::store::OutboxEvent;
use toolgate::{
    ToolError,
    outbox::{Deliver, Transaction},
};

use super::{
    ORDER_ID_MAX_LENGTH, ORDER_ID_PATTERN, Payments, RefundView, find_refund, money, to_cents,
    within_balance,
};

/// The shop's table of refund requests, in a SQLite store's database.
pub const REFUND_REQUESTS_SQLITE: &str = "CREATE TABLE IF NOT EXISTS refund_requests (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    order_id TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
)";

/// The shop's table of refund requests, in a PostgreSQL store's database.
pub const REFUND_REQUESTS_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS refund_requests (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    order_id TEXT NOT NULL,
    amount_cents BIGINT NOT NULL,
    PRIMARY KEY (tenant, key)
)";

/// The event an outbox refund enqueues: what the worker sends to the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundEvent {
    /// The order to refund.
    pub order_id: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// What the model reads when the refund is queued: the refund requested, not yet sent.
#[derive(Debug, Serialize)]
pub struct RefundRequestView {
    order_id: String,
    amount: String,
}

/// Refund part or all of a paid order. The refund is final. It is recorded at once and sent to
/// the payment provider afterwards by the shop's worker: the answer is `queued` with the
/// operation's id until the provider has applied it; asking again with the same order and
/// amount tells how far the delivery got.
#[tool(
    name = "issue_refund",
    side_effect = "write",
    delivery = "outbox",
    permission = "refund:create",
    approval_over = 5000,
    key = [order_id],
    resource = order_id,
    timeout = "10s",
    reconcile = find_refund(ctx, key),
    approver = "refund:approve",
    check = within_balance(ctx, order_id, amount)
)]
pub async fn issue_refund_outbox(
    ctx: &Ctx,
    key: &IdempotencyKey,
    /// The order to refund, such as `ORD-1001`.
    #[schemars(pattern(ORDER_ID_PATTERN), length(max = ORDER_ID_MAX_LENGTH))]
    order_id: String,
    /// The amount to refund, in the order's currency, with at most two decimals.
    #[schemars(extend("exclusiveMinimum" = 0, "multipleOf" = 0.01))]
    amount: f64,
) -> Result<RefundRequestView, ToolError> {
    let amount_cents = to_cents(amount)?;
    let mut tx = ctx.transaction().await?;
    record_request(&mut tx, ctx.auth().tenant(), key, &order_id, amount_cents).await?;
    drop(tx);
    ctx.enqueue(&RefundEvent {
        order_id: order_id.clone(),
        amount_cents,
    })?;
    Ok(RefundRequestView {
        order_id,
        amount: money(amount_cents),
    })
}

/// Inserts the refund request into `refund_requests` with the store's connection inside `tx`.
async fn record_request(
    tx: &mut Transaction<'_>,
    tenant: &str,
    key: &str,
    order_id: &str,
    amount_cents: u64,
) -> Result<(), ToolError> {
    let amount = i64::try_from(amount_cents)
        .map_err(|_| ToolError::invalid_arguments("the amount is too large to record"))?;
    let inserted = match tx.store_name() {
        "SQLite" => {
            let connection = toolgate_store_sqlite::connection(tx)?;
            sqlx::query(
                "INSERT INTO refund_requests (tenant, key, order_id, amount_cents) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(tenant)
            .bind(key)
            .bind(order_id)
            .bind(amount)
            .execute(connection)
            .await
            .map(drop)
        }
        "PostgreSQL" => {
            let connection = toolgate_store_postgres::connection(tx)?;
            sqlx::query(
                "INSERT INTO refund_requests (tenant, key, order_id, amount_cents) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(tenant)
            .bind(key)
            .bind(order_id)
            .bind(amount)
            .execute(connection)
            .await
            .map(drop)
        }
        other => {
            return Err(ToolError::internal(format!(
                "the outbox refund keeps its rows in SQLite or PostgreSQL, not in the {other} store"
            )));
        }
    };
    inserted.map_err(|err| {
        ToolError::unavailable("the refund request could not be recorded")
            .with_why(format!(
                "the database refused the row ({err}); nothing was kept"
            ))
            .with_next("try the same refund again in a moment")
    })
}

/// The outbox worker's handler of refunds: sends the event's refund to the payment provider
/// under the event's key, the operation's idempotency key.
pub struct RefundDelivery {
    payments: Arc<dyn Payments>,
    honours_key: bool,
}

impl RefundDelivery {
    /// Delivers to `payments`; `honours_key` says whether that provider applies one key once
    /// (the fake provider the desk runs does).
    pub fn new(payments: Arc<dyn Payments>, honours_key: bool) -> Self {
        RefundDelivery {
            payments,
            honours_key,
        }
    }
}

#[async_trait::async_trait]
impl Deliver for RefundDelivery {
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        let refund: RefundEvent = serde_json::from_str(&event.payload).map_err(|err| {
            ToolError::internal(format!("the refund event is not a refund: {err}"))
        })?;
        let receipt = self
            .payments
            .refund(&event.key, &refund.order_id, refund.amount_cents)
            .await?;
        serde_json::to_value(RefundView::from(receipt))
            .map_err(|err| ToolError::internal(format!("the receipt does not serialize: {err}")))
    }

    fn honours_key(&self) -> bool {
        self.honours_key
    }
}
