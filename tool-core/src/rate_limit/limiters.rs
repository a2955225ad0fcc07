//! The buckets the dispatcher keeps, one per tool and tenant, and the answer to a call over its
//! tool's limit.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::Clock as _;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};

use super::RateLimit;
use super::clock::LimiterClock;
use crate::clock::Clock;
use crate::descriptor::ToolDescriptor;
use crate::error::{ErrorKind, ToolError};
use crate::registry::Registry;

/// One tool's buckets, keyed by tenant.
type TenantBuckets =
    RateLimiter<String, HashMapStateStore<String>, LimiterClock, NoOpMiddleware<Nanos>>;

/// How many checks of one tool pass between two cleanups of its buckets.
const CLEANUP_EVERY: u32 = 1024;

/// The rate limits of a dispatcher's tools, enforced per tool and per tenant.
///
/// A tool with `rate_limit = "N/per"` gets a token bucket for each tenant that calls it: `N`
/// calls at once, then one more every `per / N`. The buckets live in this value, so in the
/// memory of one dispatcher (its clones share them). They do not grow without bound: every
/// [`CLEANUP_EVERY`] checks of a tool, the buckets of tenants that are full again (they would
/// let a whole burst through, as a new bucket does) are dropped and the map shrunk; a bucket
/// still being refilled is kept.
pub(crate) struct RateLimiters {
    by_tool: HashMap<&'static str, Limiter>,
}

/// How one tool is limited.
enum Limiter {
    /// A limit of zero calls: no call passes.
    Closed,
    /// A bucket per tenant.
    Buckets {
        buckets: TenantBuckets,
        /// Checks so far, to clean up every [`CLEANUP_EVERY`]; it wraps, which keeps the
        /// rhythm, as `CLEANUP_EVERY` divides 2³².
        checks: AtomicU32,
    },
}

impl RateLimiters {
    /// The limits of the tools in `registry`, their buckets refilled on `clock`.
    pub(crate) fn new(registry: &Registry, clock: Arc<dyn Clock>) -> Self {
        Self::of(registry.iter().map(|tool| tool.descriptor()), clock)
    }

    /// The limits of the tools `descriptors`.
    fn of(
        descriptors: impl Iterator<Item = &'static ToolDescriptor>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let clock = LimiterClock(clock);
        let by_tool = descriptors
            .filter_map(|descriptor| {
                let limiter = Limiter::of(descriptor.rate_limit?, &clock)?;
                Some((descriptor.name, limiter))
            })
            .collect();
        RateLimiters { by_tool }
    }

    /// Spends one call of `tenant` on `tool`, or answers
    /// [`ErrorKind::RateLimited`] with how long to wait
    /// ([`ToolError::retry_after`]) when its bucket is empty, and [`ErrorKind::Refused`] when
    /// its limit lets no call through at all (waiting would not help). A tool without a limit
    /// costs a look at its descriptor.
    pub(crate) fn check(&self, tool: &ToolDescriptor, tenant: &str) -> Result<(), ToolError> {
        let Some(rate) = tool.rate_limit else {
            return Ok(());
        };
        match self.by_tool.get(tool.name) {
            None => Ok(()),
            Some(Limiter::Closed) => Err(closed(tool.name, rate)),
            Some(Limiter::Buckets { buckets, checks }) => {
                let outcome = buckets.check_key(&tenant.to_owned());
                if checks.fetch_add(1, Ordering::Relaxed) % CLEANUP_EVERY == CLEANUP_EVERY - 1 {
                    buckets.retain_recent();
                    buckets.shrink_to_fit();
                }
                outcome.map_err(|not_until| {
                    let wait = not_until.wait_time_from(buckets.clock().now());
                    over_limit(tool.name, rate, wait)
                })
            }
        }
    }

    /// How many tenants of `tool` have a bucket.
    #[cfg(test)]
    fn tenants(&self, tool: &str) -> usize {
        match self.by_tool.get(tool) {
            Some(Limiter::Buckets { buckets, .. }) => buckets.len(),
            _ => 0,
        }
    }
}

impl Limiter {
    /// The limiter of `rate`, or none for a period of zero (no limit).
    fn of(rate: RateLimit, clock: &LimiterClock) -> Option<Limiter> {
        let Some(count) = NonZeroU32::new(rate.count) else {
            return Some(Limiter::Closed);
        };
        if rate.per.is_zero() {
            return None;
        }
        // A period shorter than `count` nanoseconds still limits: one call a nanosecond.
        let per_call = (rate.per / count.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(per_call)?.allow_burst(count);
        Some(Limiter::Buckets {
            buckets: RateLimiter::new(quota, HashMapStateStore::default(), clock.clone()),
            checks: AtomicU32::new(0),
        })
    }
}

/// A call of `tool` over its limit `rate`; the tenant's bucket has a call again after `wait`.
fn over_limit(tool: &str, rate: RateLimit, wait: Duration) -> ToolError {
    // Whole milliseconds, rounded up: after waiting that long, the call passes.
    let ms = u64::try_from(wait.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .max(1);
    ToolError::new(
        ErrorKind::RateLimited,
        format!("{tool} was called more often than its limit of {rate} allows for this tenant"),
    )
    .with_why(format!(
        "each tenant may call {tool} at most {rate}; this call was not run"
    ))
    .with_next(format!("wait {ms} ms, then call {tool} again"))
    .with_retry_after(Duration::from_millis(ms))
}

/// A call of `tool`, whose limit `rate` lets no call through.
fn closed(tool: &str, rate: RateLimit) -> ToolError {
    ToolError::refused(format!("{tool} lets no call through: its limit is {rate}"))
        .with_why("this call was not run, and no call of it will be")
        .with_next(format!(
            "do not repeat this call: do not call {tool}; tell the user it is not available"
        ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::ManualClock;

    const SECOND: Duration = Duration::from_secs(1);

    static TWO_PER_SECOND: ToolDescriptor =
        ToolDescriptor::new("lookup", "Looks up.").with_rate_limit(RateLimit::new(2, SECOND));
    static THREE_PER_SECOND: ToolDescriptor =
        ToolDescriptor::new("search", "Searches.").with_rate_limit(RateLimit::new(3, SECOND));
    static FIVE_PER_MINUTE: ToolDescriptor = ToolDescriptor::new("report", "Reports.")
        .with_rate_limit(RateLimit::new(5, Duration::from_secs(60)));
    static TEN_PER_HOUR: ToolDescriptor = ToolDescriptor::new("export", "Exports.")
        .with_rate_limit(RateLimit::new(10, Duration::from_secs(3600)));
    static UNLIMITED: ToolDescriptor = ToolDescriptor::new("ping", "Pings.");
    static ZERO_CALLS: ToolDescriptor =
        ToolDescriptor::new("frozen", "Never.").with_rate_limit(RateLimit::new(0, SECOND));
    static ZERO_PERIOD: ToolDescriptor = ToolDescriptor::new("instant", "Always.")
        .with_rate_limit(RateLimit::new(1, Duration::ZERO));

    fn limiters(clock: &Arc<ManualClock>) -> RateLimiters {
        let descriptors = [
            &TWO_PER_SECOND,
            &THREE_PER_SECOND,
            &FIVE_PER_MINUTE,
            &TEN_PER_HOUR,
            &UNLIMITED,
            &ZERO_CALLS,
            &ZERO_PERIOD,
        ];
        RateLimiters::of(descriptors.into_iter(), clock.clone())
    }

    /// Spends `n` calls of `tenant` on `tool`, each of which must pass.
    fn spend(limiters: &RateLimiters, tool: &ToolDescriptor, tenant: &str, n: u32) {
        for call in 1..=n {
            let passed = limiters.check(tool, tenant);
            assert!(passed.is_ok(), "call {call} of {n} was refused: {passed:?}");
        }
    }

    /// The wait a refused call is told, asserting it was refused as over the limit.
    fn refused_wait(limiters: &RateLimiters, tool: &ToolDescriptor, tenant: &str) -> Duration {
        let err = limiters.check(tool, tenant).expect_err("over the limit");
        assert_eq!(err.kind(), ErrorKind::RateLimited);
        err.retry_after().expect("a wait")
    }

    #[test]
    fn a_burst_passes_then_the_next_call_waits_exactly_until_a_call_is_back() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let limiters = limiters(&clock);
        spend(&limiters, &TWO_PER_SECOND, "acme", 2);
        let err = limiters.check(&TWO_PER_SECOND, "acme").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::RateLimited);
        assert_eq!(err.retry_after(), Some(Duration::from_millis(500)));
        assert_eq!(
            err.what(),
            "lookup was called more often than its limit of 2/s allows for this tenant"
        );
        assert_eq!(
            err.why(),
            Some("each tenant may call lookup at most 2/s; this call was not run")
        );
        assert_eq!(err.next(), "wait 500 ms, then call lookup again");

        // One millisecond short, still refused, and told the rest.
        clock.advance_ms(499);
        assert_eq!(
            refused_wait(&limiters, &TWO_PER_SECOND, "acme"),
            Duration::from_millis(1)
        );
        clock.advance_ms(1);
        spend(&limiters, &TWO_PER_SECOND, "acme", 1);
        assert_eq!(
            refused_wait(&limiters, &TWO_PER_SECOND, "acme"),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_wait_of_a_fraction_of_a_millisecond_is_rounded_up_so_that_waiting_it_is_enough() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &THREE_PER_SECOND, "acme", 3);
        // One call every 333.33… ms.
        let wait = refused_wait(&limiters, &THREE_PER_SECOND, "acme");
        assert_eq!(wait, Duration::from_millis(334));
        clock.advance_ms(333);
        refused_wait(&limiters, &THREE_PER_SECOND, "acme");
        clock.advance_ms(1);
        spend(&limiters, &THREE_PER_SECOND, "acme", 1);
    }

    #[test]
    fn tenants_do_not_share_a_bucket() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &TWO_PER_SECOND, "acme", 2);
        refused_wait(&limiters, &TWO_PER_SECOND, "acme");
        spend(&limiters, &TWO_PER_SECOND, "globex", 2);
        refused_wait(&limiters, &TWO_PER_SECOND, "globex");
        assert_eq!(limiters.tenants("lookup"), 2);
    }

    #[test]
    fn tools_do_not_share_a_bucket() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &TWO_PER_SECOND, "acme", 2);
        refused_wait(&limiters, &TWO_PER_SECOND, "acme");
        spend(&limiters, &THREE_PER_SECOND, "acme", 3);
        refused_wait(&limiters, &THREE_PER_SECOND, "acme");
    }

    #[test]
    fn a_tool_without_a_limit_is_never_refused_and_gets_no_buckets() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &UNLIMITED, "acme", 10_000);
        assert!(!limiters.by_tool.contains_key("ping"));
    }

    #[test]
    fn a_limit_per_minute_refills_one_call_every_minute_over_its_count() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &FIVE_PER_MINUTE, "acme", 5);
        let err = limiters.check(&FIVE_PER_MINUTE, "acme").unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(12)));
        assert_eq!(
            err.what(),
            "report was called more often than its limit of 5/min allows for this tenant"
        );
        assert_eq!(err.next(), "wait 12000 ms, then call report again");
        clock.advance_ms(12_000);
        spend(&limiters, &FIVE_PER_MINUTE, "acme", 1);
        refused_wait(&limiters, &FIVE_PER_MINUTE, "acme");
        // A whole minute without calls refills the burst.
        clock.advance_ms(60_000);
        spend(&limiters, &FIVE_PER_MINUTE, "acme", 5);
        refused_wait(&limiters, &FIVE_PER_MINUTE, "acme");
    }

    #[test]
    fn a_limit_per_hour_refills_one_call_every_hour_over_its_count() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        spend(&limiters, &TEN_PER_HOUR, "acme", 10);
        assert_eq!(
            refused_wait(&limiters, &TEN_PER_HOUR, "acme"),
            Duration::from_secs(360)
        );
        clock.advance_ms(359_999);
        refused_wait(&limiters, &TEN_PER_HOUR, "acme");
        clock.advance_ms(1);
        spend(&limiters, &TEN_PER_HOUR, "acme", 1);
    }

    #[test]
    fn a_limit_of_zero_calls_refuses_every_call_and_a_period_of_zero_none() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        let err = limiters.check(&ZERO_CALLS, "acme").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert_eq!(err.retry_after(), None);
        assert_eq!(err.what(), "frozen lets no call through: its limit is 0/s");
        spend(&limiters, &ZERO_PERIOD, "acme", 1_000);
    }

    #[test]
    fn the_cleanup_drops_buckets_that_are_full_again_and_keeps_a_spent_one() {
        let clock = Arc::new(ManualClock::new(0));
        let limiters = limiters(&clock);
        // Many tenants call once each; a second later every one of their buckets is full again.
        let tenants = CLEANUP_EVERY - 3;
        for n in 0..tenants {
            spend(&limiters, &TWO_PER_SECOND, &format!("tenant-{n}"), 1);
        }
        clock.advance_ms(1_000);
        spend(&limiters, &TWO_PER_SECOND, "acme", 2);
        assert_eq!(limiters.tenants("lookup"), 1 + tenants as usize);
        // The check that reaches CLEANUP_EVERY finds acme spent, and cleans up.
        assert_eq!(
            refused_wait(&limiters, &TWO_PER_SECOND, "acme"),
            Duration::from_millis(500)
        );
        assert_eq!(limiters.tenants("lookup"), 1, "only acme's bucket is left");
        // acme's bucket was kept as it was: a new one would let the next call through.
        assert_eq!(
            refused_wait(&limiters, &TWO_PER_SECOND, "acme"),
            Duration::from_millis(500)
        );
        clock.advance_ms(500);
        spend(&limiters, &TWO_PER_SECOND, "acme", 1);
        refused_wait(&limiters, &TWO_PER_SECOND, "acme");
        // A dropped tenant starts again with a whole burst.
        spend(&limiters, &TWO_PER_SECOND, "tenant-0", 2);
    }
}
