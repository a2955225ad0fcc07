//! The claim a worker holds on an operation: what it presents to record its outcome.

/// The claim a worker holds: it must present it to record an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken {
    /// The tenant.
    pub tenant: String,
    /// The key.
    pub key: String,
    /// The attempt claimed.
    pub attempt: u32,
}
