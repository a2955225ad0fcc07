//! The outbox seen from a tool's body: its transaction and its one event; and the worker that
//! delivers the events.

mod delivery_audit;
mod verdict;
mod worker;

use std::any::Any;
use std::sync::Mutex;

use serde::Serialize;

use crate::error::ToolError;
use crate::store::{NewEvent, StoreTransaction};

pub use worker::{Deliver, DeliveryReport, OutboxWorker, OutboxWorkerBuilder};

/// What an outbox tool's body holds while it runs: the store's open transaction, and the event
/// it enqueued. The dispatcher takes both back when the body returns.
pub(crate) struct OutboxSlot {
    tx: tokio::sync::Mutex<Option<Box<dyn StoreTransaction>>>,
    event: Mutex<Option<NewEvent>>,
}

impl std::fmt::Debug for OutboxSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxSlot").finish_non_exhaustive()
    }
}

impl OutboxSlot {
    pub(crate) fn new(tx: Box<dyn StoreTransaction>) -> Self {
        OutboxSlot {
            tx: tokio::sync::Mutex::new(Some(tx)),
            event: Mutex::new(None),
        }
    }

    /// The transaction and the event, once the body has returned: waits for a
    /// [`Transaction`] the body left alive (in a task it spawned) to be dropped.
    pub(crate) async fn take(&self) -> (Option<Box<dyn StoreTransaction>>, Option<NewEvent>) {
        let tx = self.tx.lock().await.take();
        let event = self
            .event
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        (tx, event)
    }

    pub(crate) async fn transaction(&self) -> Result<Transaction<'_>, ToolError> {
        let guard = self.tx.lock().await;
        if guard.is_none() {
            return Err(ToolError::internal(
                "the outbox transaction is over: the call has returned",
            ));
        }
        Ok(Transaction { guard })
    }

    pub(crate) fn enqueue(&self, tool: &str, payload: String) -> Result<(), ToolError> {
        let mut event = self
            .event
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if event.is_some() {
            return Err(ToolError::internal(format!(
                "{tool} enqueued a second event; an outbox tool enqueues one event per operation"
            ))
            .with_next("do not repeat this call; tell the user the tool failed (it must enqueue one event that carries everything the worker delivers)"));
        }
        *event = Some(NewEvent { payload });
        Ok(())
    }
}

/// The store's transaction, lent to an outbox tool's body by
/// [`Ctx::transaction`](crate::Ctx::transaction). Write the application's rows with the store's
/// connection inside it: `toolgate_store_sqlite::connection(&mut tx)` or
/// `toolgate_store_postgres::connection(&mut tx)`. They commit with the operation record and
/// the event, or roll back with them. Do not keep it past the body's return.
pub struct Transaction<'a> {
    guard: tokio::sync::MutexGuard<'a, Option<Box<dyn StoreTransaction>>>,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("store", &self.store_name())
            .finish_non_exhaustive()
    }
}

impl Transaction<'_> {
    /// The store's connection inside the transaction, when it is a `C`; the store crates'
    /// `connection` functions call this with their connection type.
    pub fn connection<C: Any>(&mut self) -> Option<&mut C> {
        self.guard
            .as_mut()
            .and_then(|tx| tx.connection().downcast_mut::<C>())
    }

    /// Which store opened the transaction (`"SQLite"`, `"PostgreSQL"`, `"memory"`).
    pub fn store_name(&self) -> &'static str {
        self.guard.as_ref().map_or("none", |tx| tx.store_name())
    }
}

/// The payload of an event as JSON text, or an internal error naming the tool.
pub(crate) fn payload_of<T: Serialize + ?Sized>(
    tool: &str,
    payload: &T,
) -> Result<String, ToolError> {
    serde_json::to_string(payload).map_err(|err| {
        ToolError::internal(format!(
            "{tool} enqueued an event that does not serialize to JSON: {err}"
        ))
    })
}
