//! The dispatcher's clock, as the rate limiter reads time.

use std::sync::Arc;

use governor::nanos::Nanos;

use crate::clock::Clock;

/// Reads the dispatcher's [`Clock`] for the rate limiter, so the buckets refill on the time the
/// dispatcher keeps (and tests move), never on a clock of their own.
#[derive(Clone)]
pub(super) struct LimiterClock(pub(super) Arc<dyn Clock>);

impl governor::clock::Clock for LimiterClock {
    type Instant = Nanos;

    /// The clock's milliseconds since the Unix epoch, in nanoseconds; a time before the epoch
    /// reads as the epoch.
    fn now(&self) -> Nanos {
        let ms = u64::try_from(self.0.now_ms()).unwrap_or(0);
        Nanos::new(ms.saturating_mul(1_000_000))
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::Clock as _;

    use super::*;
    use crate::dispatch::ManualClock;

    #[test]
    fn reads_the_dispatchers_milliseconds_as_nanoseconds() {
        let manual = Arc::new(ManualClock::new(1_500));
        let clock = LimiterClock(manual.clone());
        assert_eq!(clock.now(), Nanos::new(1_500_000_000));
        manual.advance_ms(2);
        assert_eq!(clock.now(), Nanos::new(1_502_000_000));
        manual.set_ms(-5);
        assert_eq!(clock.now(), Nanos::new(0));
    }
}
