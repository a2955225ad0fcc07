//! The desk's outbox: the `delivery` line that switches `issue_refund` to the outbox, the
//! `deliver` line that runs the worker, and the shop's `refund_requests` table the outbox refund
//! writes in the store's database.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use toolgate::dispatch::Clock;
use toolgate::store::OperationStore;
use toolgate::{
    outbox::OutboxWorker,
    tool::{Delivery, RetrySpec},
};

use crate::payments::client::HttpPayments;
use crate::shop::{REFUND_REQUESTS_POSTGRES, REFUND_REQUESTS_SQLITE, RefundDelivery};

use super::{Desk, StoreSpec};
use crate::refund_desk::narrate::Voice;

/// How many deliveries of one event the desk's worker makes before it dead-letters it.
pub(crate) const DELIVERY_ATTEMPTS: u32 = 3;

/// The desk's worker retries at once: no backoff, so that a script's `deliver` line drains every
/// retry and answers the same on every run.
fn retry() -> RetrySpec {
    RetrySpec {
        max_attempts: Some(DELIVERY_ATTEMPTS),
        base: Some(Duration::ZERO),
        max: Some(Duration::ZERO),
        jitter: Some(false),
    }
}

/// Creates the shop's `refund_requests` table in the store's database, if it is not there: the
/// rows an outbox refund writes inside the store's transaction.
pub async fn create_tables(spec: &StoreSpec) -> Result<(), String> {
    let created = match spec {
        StoreSpec::Sqlite(path) => {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .busy_timeout(Duration::from_secs(5));
            match sqlx::SqliteConnection::connect_with(&options).await {
                Ok(mut connection) => {
                    let done = sqlx::query(REFUND_REQUESTS_SQLITE)
                        .execute(&mut connection)
                        .await;
                    let _ = connection.close().await;
                    done.map(drop)
                }
                Err(err) => Err(err),
            }
        }
        StoreSpec::Postgres(url) => match sqlx::PgConnection::connect(url).await {
            Ok(mut connection) => {
                let done = create_postgres_table(&mut connection).await;
                let _ = connection.close().await;
                done
            }
            Err(err) => Err(err),
        },
    };
    created.map_err(|err| format!("cannot create the shop's refund_requests table: {err}"))
}

/// The key of the advisory lock that makes desks starting at once on one PostgreSQL database
/// create the table one after the other: two concurrent `CREATE TABLE IF NOT EXISTS` can both
/// find it missing, and the second fails.
const TABLES_LOCK: i64 = 0x7e57_0b0c;

async fn create_postgres_table(connection: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let mut tx = connection.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(TABLES_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query(REFUND_REQUESTS_POSTGRES)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// The desk's outbox worker on `store`: each queued refund sent to the provider `payments`
/// reaches, under its operation's key, 3 times at most and retried at once, by `clock`.
pub fn worker(
    store: Arc<dyn OperationStore>,
    payments: HttpPayments,
    clock: Arc<dyn Clock>,
) -> Result<OutboxWorker, String> {
    OutboxWorker::builder(store)
        .name("desk-worker")
        .deliver(
            "issue_refund",
            RefundDelivery::new(Arc::new(payments), true),
        )
        .retry(retry())
        .clock(clock)
        .seed(0x7e57)
        .build()
        .map_err(|err| format!("cannot build the outbox worker: {err}"))
}

impl Desk {
    /// `{"delivery": "direct" | "outbox"}`: the dispatcher is built again on the same store
    /// with `issue_refund` calling the provider while the model waits, or through the outbox.
    pub(super) async fn set_delivery(&mut self, delivery: Delivery) -> Result<(), String> {
        self.delivery = delivery;
        if let Some((store, _)) = self.open.take() {
            let dispatcher = super::dispatcher(
                &store,
                &self.payments,
                &self.clock,
                delivery,
                &self.hash_secret,
            );
            self.open = Some((store, dispatcher));
        }
        self.say(
            Voice::Title,
            &format!("issue_refund is delivered {}", delivery_story(delivery)),
        );
        Ok(())
    }

    /// `{"deliver": {}}`: the outbox worker delivers every event due, retrying at once, until
    /// each is delivered, dead or unknown.
    pub(super) async fn deliver(&mut self) -> Result<Value, String> {
        // Opens the store again first if a restart left the desk without one.
        self.dispatcher().await?;
        let store = match &self.open {
            Some((store, _)) => store.shared(),
            None => return Err("the store is not open".to_owned()),
        };
        let worker = worker(store, self.payments.clone(), self.clock.clone())?;
        let report = worker
            .drain()
            .await
            .map_err(|err| format!("the outbox worker failed: {err}"))?;
        self.say(
            Voice::Title,
            &format!(
                "outbox worker: {} delivered, {} to retry, {} dead, {} unknown",
                report.delivered, report.retrying, report.dead, report.unknown
            ),
        );
        if report.dead > 0 {
            self.aside(
                "A dead event's refund was never applied: its operation stays queued until an \
                 operator resumes it (`toolgate outbox resume KEY`).",
            );
        }
        Ok(json!({
            "delivered": report.delivered,
            "retrying": report.retrying,
            "dead": report.dead,
        }))
    }
}

/// "through the outbox", "directly".
fn delivery_story(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Outbox => "through the outbox: recorded with the operation, sent by the worker",
        _ => "directly: sent to the provider while the model waits",
    }
}
