//! Wall-clock time for leases and retention, injected so tests can move it by hand.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the dispatcher and the reconciler read the time they store (leases, retention).
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

/// A clock that moves only when told to, for tests.
///
/// ```
/// use toolgate::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance_ms(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock showing `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock(AtomicI64::new(now_ms))
    }

    /// Moves the clock forward.
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set_ms(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
