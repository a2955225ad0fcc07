//! How a write tool's side effect leaves the process.

/// How a write tool's side effect leaves the process (`delivery = "outbox"` on `#[tool]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Delivery {
    /// The body calls the provider while the model waits (the default).
    #[default]
    Direct,
    /// The body runs inside a transaction of the operation store
    /// ([`Ctx::transaction`](crate::Ctx::transaction)): it writes the application's own rows
    /// with it and enqueues one event ([`Ctx::enqueue`](crate::Ctx::enqueue)); the operation
    /// record, the rows and the event commit together or not at all, and the model reads
    /// `queued`. An [`OutboxWorker`](crate::outbox::OutboxWorker) delivers the event to the provider
    /// later, with the operation's key.
    Outbox,
}

impl Delivery {
    /// The attribute's value: `direct` or `outbox`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Delivery::Direct => "direct",
            Delivery::Outbox => "outbox",
        }
    }
}
