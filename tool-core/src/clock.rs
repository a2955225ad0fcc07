//! Wall-clock time for leases, retention and rate limits, injected so tests can move it by hand.

use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(feature = "test-util")]
mod manual;

#[cfg(feature = "test-util")]
pub use manual::ManualClock;

/// Where the dispatcher and the reconciler read the time they store (leases, retention), and
/// the time the buckets of rate limits refill on.
/// Waiting (timeouts, backoff) uses tokio's clock, which tests pause and advance.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}
