//! A clock for tests, moved by hand.

use std::sync::atomic::{AtomicI64, Ordering};

use super::Clock;

/// A clock that moves only when told to. **For tests only**: exported with the `test-util`
/// feature, and by the `toolgate-test` crate.
///
/// ```
/// use toolgate::dispatch::Clock;
/// use toolgate_test::ManualClock;
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
