//! The error of one attempt of an operation, as its record and its step journal keep it.

/// The error of one attempt, kept in the record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptError {
    /// Which attempt (1 for the first).
    pub attempt: u32,
    /// The error kind's wire name (`retry_budget_exhausted`, `outcome_unknown`, …).
    pub kind: String,
    /// What happened.
    pub what: String,
}
