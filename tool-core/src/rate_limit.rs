//! The per-tenant rate a tool declares with `rate_limit = "N/min"`, and the buckets that
//! enforce it.

mod clock;
mod limiters;

use std::time::Duration;

pub(crate) use limiters::RateLimiters;

/// At most `count` calls per `per`, for each tenant, in each process.
///
/// The dispatcher enforces it per tool and per tenant with a token bucket: a tenant may make
/// `count` calls of the tool at once, then one more every `per / count` as its bucket refills.
/// A call is checked after its arguments are validated and its permission is checked, and
/// before it runs; a write before its idempotency key is claimed, so a duplicate that would be
/// answered from the store spends a call too. A call over the limit does
/// not run: it answers [`ErrorKind::RateLimited`](crate::ErrorKind::RateLimited)
/// (`rate_limited`), with how long to wait in
/// [`ToolError::retry_after`](crate::ToolError::retry_after) and in its `next` ("wait
/// 500 ms, then call the tool again"). Tools do not share buckets, nor do tenants. A `count`
/// of zero lets no call through; a `per` of zero puts no limit (the `#[tool]` attribute
/// accepts neither).
///
/// # Several processes
///
/// The buckets live in the memory of the [`Dispatcher`](crate::Dispatcher) (its clones share
/// them; two dispatchers built apart do not), so the limit is per process: each process has its
/// own buckets, and K processes let a tenant through up to K × `count` calls per `per`. To hold a tenant to one rate across K
/// processes, give each process a K-th of it (`"20/min"` over 4 processes: `"5/min"` each), or
/// put a shared limiter in front of the tool's service. A service's own limit still protects
/// it: a tool that answers its 429 with
/// [`ToolError::rate_limited`](crate::ToolError::rate_limited) and
/// [`retry_after`](crate::ToolError::with_retry_after) is retried below the model as a transient
/// fault, no sooner than that wait, while its retry policy's attempts and deadline allow.
///
/// ```
/// use std::time::Duration;
/// use toolgate::tool::RateLimit;
///
/// let rate = RateLimit::new(20, Duration::from_secs(60));
/// assert_eq!(rate.to_string(), "20/min");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed in one period.
    pub count: u32,
    /// The period.
    pub per: Duration,
}

impl RateLimit {
    /// A rate of `count` calls per `per`.
    pub const fn new(count: u32, per: Duration) -> Self {
        RateLimit { count, per }
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            3600 => "h",
            _ => return write!(f, "{}/{}ms", self.count, self.per.as_millis()),
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::{Value, json};

    use super::*;
    use crate::store::MemoryStore;
    use crate::{
        AuthContext, CallResult, Ctx, Dispatcher, ErrorKind, Registry, Session, SideEffect, Status,
        Tool, ToolCall, dispatch::ManualClock, tool::JsonText, tool::ToolDescriptor,
        tool::ToolFuture,
    };

    /// A tool of `descriptor` that answers with its arguments and counts its runs.
    struct Counted {
        descriptor: &'static ToolDescriptor,
        runs: Arc<AtomicUsize>,
    }

    static LOOKUP: ToolDescriptor = ToolDescriptor::new("lookup", "Looks an order up.")
        .with_rate_limit(RateLimit::new(2, Duration::from_secs(1)));
    static REFUND: ToolDescriptor = ToolDescriptor::new("refund", "Refunds an order.")
        .with_side_effect(SideEffect::Write)
        .with_rate_limit(RateLimit::new(2, Duration::from_secs(1)));

    impl Tool for Counted {
        fn descriptor(&self) -> &'static ToolDescriptor {
            self.descriptor
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"], "additionalProperties": false})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
        }
    }

    /// A dispatcher of `LOOKUP` and `REFUND` on `clock`, and the runs of each.
    fn dispatcher(clock: &Arc<ManualClock>) -> (Dispatcher, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (lookups, refunds) = (Arc::default(), Arc::default());
        let mut registry = Registry::new();
        for (descriptor, runs) in [(&LOOKUP, &lookups), (&REFUND, &refunds)] {
            registry
                .register_tool(Counted {
                    descriptor,
                    runs: Arc::clone(runs),
                })
                .unwrap();
        }
        let dispatcher = Dispatcher::builder(registry)
            .store(MemoryStore::new())
            .clock(clock.clone())
            .build();
        (dispatcher, lookups, refunds)
    }

    fn session(tenant: &str) -> Session {
        Session::new(AuthContext::new(tenant, "agent"), "run-1")
    }

    async fn call(
        dispatcher: &Dispatcher,
        session: &Session,
        tool: &str,
        order: &str,
    ) -> CallResult {
        let call = ToolCall::new("c1", tool, json!({"order": order}));
        dispatcher.dispatch(session, call).await.unwrap().result
    }

    #[tokio::test]
    async fn a_read_over_its_limit_answers_rate_limited_and_does_not_run() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let (dispatcher, lookups, _) = dispatcher(&clock);
        let acme = session("acme");
        for order in ["ORD-1", "ORD-2"] {
            let result = call(&dispatcher, &acme, "lookup", order).await;
            assert_eq!(result.status, Status::Succeeded);
        }
        let refused = call(&dispatcher, &acme, "lookup", "ORD-3").await;
        assert_eq!(refused.error_kind(), Some(ErrorKind::RateLimited));
        let explanation = refused.explanation().unwrap();
        assert_eq!(
            explanation.what,
            "lookup was called more often than its limit of 2/s allows for this tenant"
        );
        assert_eq!(explanation.next, "wait 500 ms, then call lookup again");
        assert_eq!(
            lookups.load(Ordering::SeqCst),
            2,
            "the third call did not run"
        );

        // Another tenant has its own bucket.
        let globex = session("globex");
        let result = call(&dispatcher, &globex, "lookup", "ORD-3").await;
        assert_eq!(result.status, Status::Succeeded);
        assert_eq!(lookups.load(Ordering::SeqCst), 3);

        // After the wait, acme's call passes.
        clock.advance_ms(500);
        let result = call(&dispatcher, &acme, "lookup", "ORD-3").await;
        assert_eq!(result.status, Status::Succeeded);
        assert_eq!(lookups.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_call_refused_before_the_limit_is_checked_does_not_spend_it() {
        let clock = Arc::new(ManualClock::new(0));
        let (dispatcher, lookups, _) = dispatcher(&clock);
        let acme = session("acme");
        // Other arguments each time: the same invalid call again would be a repeat.
        for order in 0..5 {
            let call = ToolCall::new("c1", "lookup", json!({"order": order}));
            let result = dispatcher.dispatch(&acme, call).await.unwrap().result;
            assert_eq!(result.error_kind(), Some(ErrorKind::InvalidArguments));
        }
        for order in ["ORD-1", "ORD-2"] {
            let result = call(&dispatcher, &acme, "lookup", order).await;
            assert_eq!(result.status, Status::Succeeded);
        }
        assert_eq!(lookups.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_write_over_its_limit_does_not_claim_its_key_so_it_runs_once_the_wait_is_over() {
        let clock = Arc::new(ManualClock::new(0));
        let (dispatcher, _, refunds) = dispatcher(&clock);
        let acme = session("acme");
        for order in ["ORD-1", "ORD-2"] {
            let result = call(&dispatcher, &acme, "refund", order).await;
            assert_eq!(result.status, Status::Succeeded);
        }
        let refused = call(&dispatcher, &acme, "refund", "ORD-3").await;
        assert_eq!(refused.error_kind(), Some(ErrorKind::RateLimited));
        // The limit is checked before the key: a duplicate is refused, not replayed.
        let duplicate = call(&dispatcher, &acme, "refund", "ORD-1").await;
        assert_eq!(duplicate.error_kind(), Some(ErrorKind::RateLimited));
        assert_eq!(refunds.load(Ordering::SeqCst), 2);

        clock.advance_ms(500);
        let result = call(&dispatcher, &acme, "refund", "ORD-3").await;
        assert_eq!(result.status, Status::Succeeded);
        assert!(
            !result.replayed,
            "the refused call left no record to replay"
        );
        assert_eq!(refunds.load(Ordering::SeqCst), 3);
    }
}
