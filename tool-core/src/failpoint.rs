//! Hooks at the steps of a write, for crash tests. Compiled only with the `test-util` feature:
//! without it the write path calls no hook.

/// The steps of a write at which [`Failpoints::hit`] is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failpoint {
    /// The key is claimed; the tool has not run.
    Claimed,
    /// The tool returned (or gave up); nothing is recorded yet.
    Executed,
    /// The outcome is recorded.
    Recorded,
}

/// Hooks at the steps of a write, for crash tests: a test process can stop or kill itself at a
/// precise point (between the claim, the provider call and the record) and check that a restart
/// and the reconciler still apply every effect exactly once. Production code gives none.
pub trait Failpoints: Send + Sync + 'static {
    /// Called when a write reaches `point`; it may block or end the process.
    fn hit(&self, point: Failpoint);
}
