//! The claim a write's attempts run under.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use crate::store::{ClaimToken, OperationStore};

/// The claim a write runs under: where its attempts record their errors, and under which
/// attempt of the operation.
pub(super) struct HeldClaim<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) owner: &'a ClaimToken,
    /// How long the claim holds; each retry renews it.
    pub(super) lease: Duration,
    /// The attempt running now (1 for the first), for a panic to be recorded under.
    pub(super) attempt: AtomicU32,
}
