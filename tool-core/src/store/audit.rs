//! The audit trail: one record per call the dispatcher answered, one per decision on an
//! approval (or refused attempt to make one), one per outbox delivery attempt, and one per
//! operator action, appended in the store and never changed.

/// What an audit record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditKind {
    /// A call the dispatcher answered.
    Call,
    /// A decision on an approval: a human's, an expiry, or a revalidation's rejection.
    Decision,
    /// An outbox worker's delivery attempt of an event, and what it came to.
    Delivery,
    /// An operator's action on an operation or its event (`toolgate outbox resume`), or a
    /// refused attempt at one.
    Operator,
}

impl AuditKind {
    /// The stored name: `call`, `decision`, `delivery` or `operator`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AuditKind::Call => "call",
            AuditKind::Decision => "decision",
            AuditKind::Delivery => "delivery",
            AuditKind::Operator => "operator",
        }
    }

    /// The kind named `name`, as [`AuditKind::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "call" => Some(AuditKind::Call),
            "decision" => Some(AuditKind::Decision),
            "delivery" => Some(AuditKind::Delivery),
            "operator" => Some(AuditKind::Operator),
            _ => None,
        }
    }
}

/// One audit record, before the store numbers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// A call, a decision, a delivery or an operator's action.
    pub kind: AuditKind,
    /// The tenant.
    pub tenant: String,
    /// The run of the call (for a decision, the run of the call that asked; empty for a
    /// delivery, which a worker makes outside any run).
    pub run_id: String,
    /// The call's id in its turn (for a decision, the id of the call that asked; empty for a
    /// delivery).
    pub call_id: String,
    /// The tool's wire name, as the model sent it (a call of an unknown tool keeps its name).
    pub tool: String,
    /// The user acting: the session's for a call, the approver (or `toolgate`) for a decision,
    /// the worker's name for a delivery.
    pub actor: String,
    /// The arguments as canonical JSON with the tool's sensitive arguments redacted; `null` when
    /// the call's arguments were not a JSON object the tool takes (their text is not kept), and
    /// for a delivery (its payload stays on the event).
    pub arguments: String,
    /// How many times the tool ran for this call (0 for a replay, a refusal before it ran, or a
    /// decision); for a delivery, the event's attempt number.
    pub attempts: u32,
    /// How long the call took, in milliseconds, by the dispatcher's clock.
    pub duration_ms: u64,
    /// The status the model read (`succeeded`, `error`, `awaiting_approval`, …), for a
    /// decision `approved` or `rejected`, for a delivery what it came to: `delivered`,
    /// `retrying`, `dead`, `unknown`, or `lost` (its lease ended before it was recorded).
    pub outcome: String,
    /// For an error, its kind's wire name.
    pub error_kind: Option<String>,
    /// Whether the call was answered from the store's record of an earlier one.
    pub replayed: bool,
    /// The size of the result the model read, in bytes (0 for a decision; for a delivery, the
    /// size of the provider's answer, 0 without one).
    pub bytes: u64,
    /// The operation's idempotency key, for a write or destructive call that derived one, for a
    /// decision and for a delivery.
    pub key: Option<String>,
    /// The approval, for a call that asked for one or ran under one, and for a decision.
    pub approval_id: Option<String>,
    /// Why, for a decision; for a delivery that failed, its error's `what`.
    pub reason: Option<String>,
    /// When, in milliseconds since the epoch.
    pub at_ms: i64,
}

/// An audit record as stored: its entry and its place in the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// Increasing in the order the records were appended, across the store.
    pub seq: i64,
    /// The record.
    pub entry: AuditEntry,
}

/// Which audit records to read, in the order they were appended.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditQuery<'a> {
    /// Only this tenant's.
    pub tenant: Option<&'a str>,
    /// Only this run's.
    pub run_id: Option<&'a str>,
    /// Only this operation's.
    pub key: Option<&'a str>,
    /// At most this many, the first ones; 0 means no limit.
    pub limit: u32,
}

impl AuditQuery<'_> {
    /// Whether `entry` is read.
    pub fn admits(&self, entry: &AuditEntry) -> bool {
        self.tenant.is_none_or(|tenant| entry.tenant == tenant)
            && self.run_id.is_none_or(|run| entry.run_id == run)
            && self.key.is_none_or(|key| entry.key.as_deref() == Some(key))
    }
}
