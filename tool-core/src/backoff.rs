//! Exponential backoff with full jitter, as an iterator of delays.

use std::time::Duration;

/// The delays between attempts: attempt `n` (from 0) waits a uniform draw in
/// `[0, min(max, base · 2ⁿ)]` ("full jitter"), or exactly that cap without jitter.
///
/// ```
/// use std::time::Duration;
/// use toolgate::tool::Backoff;
///
/// let delays: Vec<_> = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), false, 7)
///     .take(5)
///     .collect();
/// assert_eq!(delays, [100, 200, 400, 800, 1000].map(Duration::from_millis));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: bool,
    step: u32,
    rng: SplitMix64,
}

impl Backoff {
    /// Delays from `base` doubling up to `max`; `seed` fixes the jitter's draws.
    pub fn new(base: Duration, max: Duration, jitter: bool, seed: u64) -> Self {
        Backoff {
            base,
            max,
            jitter,
            step: 0,
            rng: SplitMix64(seed),
        }
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let factor = 1u32.checked_shl(self.step).unwrap_or(u32::MAX);
        self.step = self.step.saturating_add(1);
        let cap = self.base.saturating_mul(factor).min(self.max);
        if !self.jitter {
            return Some(cap);
        }
        let millis = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
        Some(Duration::from_millis(
            self.rng.next() % millis.saturating_add(1),
        ))
    }
}

/// A small, seedable generator for jitter (SplitMix64); not for anything secret.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A seed for the jitter of one call (or run), from its id: the same id, the same delays.
pub(crate) fn seed_of(call_id: &str) -> u64 {
    call_id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_under_the_cap_and_is_seeded() {
        let draw = || -> Vec<_> {
            Backoff::new(
                Duration::from_millis(100),
                Duration::from_millis(800),
                true,
                42,
            )
            .take(200)
            .collect()
        };
        let delays = draw();
        for (n, delay) in delays.iter().enumerate() {
            let cap = Duration::from_millis(100 * (1 << n.min(3)));
            assert!(*delay <= cap, "attempt {n}: {delay:?} over {cap:?}");
        }
        let again = draw();
        assert_eq!(delays, again, "the same seed draws the same delays");
        assert!(
            delays.iter().any(|d| *d < Duration::from_millis(400))
                && delays.iter().any(|d| *d > Duration::from_millis(400))
        );
    }

    #[test]
    fn the_exponent_never_overflows() {
        let last = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), false, 0).nth(100);
        assert_eq!(last, Some(Duration::from_secs(30)));
    }
}
