//! [`Fault`]: how one planned request misbehaves.

use std::time::Duration;

/// How one request misbehaves, played by a [`FaultProxy`](super::FaultProxy) or a
/// [`FaultHook`](super::FaultHook).
///
/// Two faults prove that nothing was applied (the provider was not reached), two that the
/// request was applied and its answer lost, and one only slows the request down:
///
/// | fault | reaches the provider | the client sees |
/// |---|---|---|
/// | [`Unavailable`](Fault::Unavailable) | no | `503 Service Unavailable` |
/// | [`RateLimited`](Fault::RateLimited) | no | `429 Too Many Requests` with `retry-after` |
/// | [`DropAfterApply`](Fault::DropAfterApply) | yes, applied | no answer, until its own deadline |
/// | [`ResetAfterApply`](Fault::ResetAfterApply) | yes, applied | the connection reset |
/// | [`Delay`](Fault::Delay) | yes, late | the provider's answer, late |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Answered `503 Service Unavailable` without reaching the provider: nothing is applied.
    Unavailable,
    /// Answered `429 Too Many Requests` with a `retry-after` header (whole seconds, rounded up)
    /// without reaching the provider: nothing is applied.
    RateLimited {
        /// How long the client is told to wait.
        retry_after: Duration,
    },
    /// Sent to the provider, which applies it; its answer is then never given. The proxy holds
    /// the client's connection open until the client gives up and closes it: the client's own
    /// deadline decides, never a timer of the proxy.
    DropAfterApply,
    /// Sent to the provider, which applies it; the client's connection is then reset, without
    /// an answer.
    ResetAfterApply,
    /// Sent to the provider after this long, and answered as usual. A client that gives up
    /// while it waits sent a request that was never applied: its record says
    /// [`Upstream::Abandoned`](super::Upstream::Abandoned).
    Delay(Duration),
}

impl Fault {
    /// Whether the request reaches the provider when this fault is played.
    pub const fn reaches_provider(self) -> bool {
        !matches!(self, Fault::Unavailable | Fault::RateLimited { .. })
    }
}

/// The `retry-after` header's value for `after`: whole seconds, rounded up, so a client that
/// obeys it never comes back too early.
pub(crate) fn retry_after_seconds(after: Duration) -> u64 {
    after.as_secs() + u64::from(after.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let cases = [
            (Duration::ZERO, 0),
            (Duration::from_nanos(1), 1),
            (Duration::from_millis(999), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1001), 2),
            (Duration::from_secs(30), 30),
            (Duration::from_secs(30) + Duration::from_nanos(1), 31),
        ];
        for (after, seconds) in cases {
            assert_eq!(retry_after_seconds(after), seconds, "{after:?}");
        }
    }

    #[test]
    fn only_the_refusals_keep_a_request_from_the_provider() {
        let cases = [
            (Fault::Unavailable, false),
            (
                Fault::RateLimited {
                    retry_after: Duration::from_secs(1),
                },
                false,
            ),
            (Fault::DropAfterApply, true),
            (Fault::ResetAfterApply, true),
            (Fault::Delay(Duration::from_secs(1)), true),
        ];
        for (fault, reaches) in cases {
            assert_eq!(fault.reaches_provider(), reaches, "{fault:?}");
        }
    }
}
