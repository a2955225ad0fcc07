//! [`FaultHook`]: the faults of a [`FaultPlan`], played by a tool around a provider that is not
//! HTTP (a queue, an SDK, a database), which the tool calls between the hook's two calls.

use std::time::Duration;

use http::Method;
use toolgate_core::ToolError;

use super::{Fault, FaultPlan, Upstream};

/// Plays a [`FaultPlan`] inside a tool, around its call to a provider that a
/// [`FaultProxy`](super::FaultProxy) cannot stand in front of. The tool calls
/// [`FaultHook::before_send`] before it sends a request and [`FaultHook::after_apply`] once the
/// provider has answered, and acts as each says; the hook records the request as the proxy
/// would, with the key the tool sent.
///
/// The tool names each request with a method and a path, as the plan's [`Route`]s choose them:
/// `POST /emails` for an e-mail sent, say.
///
/// [`Route`]: super::Route
///
/// # Examples
///
/// ```
/// use http::Method;
/// use toolgate::ToolError;
/// use toolgate_test::chaos::{Fault, FaultHook, FaultPlan, Route};
///
/// /// Sends an e-mail under `key`, with the hook around the provider's call.
/// async fn send_email(hook: &FaultHook, outbox: &mut Vec<String>, key: &str) -> Result<(), ToolError> {
///     let sent = hook.before_send(Method::POST, "/emails", Some(key)).await?;
///     outbox.push(key.to_owned()); // the provider applies it
///     hook.after_apply(sent)?;
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let plan = FaultPlan::new();
/// plan.at(Route::post("/emails"), [1], Fault::Unavailable);
/// plan.at(Route::post("/emails"), [2], Fault::DropAfterApply);
/// let hook = FaultHook::new(plan.clone());
/// let mut outbox = Vec::new();
///
/// let refused = send_email(&hook, &mut outbox, "k1").await.unwrap_err();
/// assert_eq!(refused.kind(), toolgate::ErrorKind::Unavailable);
/// assert!(outbox.is_empty(), "the provider was not reached");
///
/// let lost = send_email(&hook, &mut outbox, "k1").await.unwrap_err();
/// assert_eq!(lost.kind(), toolgate::ErrorKind::OutcomeUnknown);
/// assert_eq!(outbox, ["k1"], "applied, and its answer lost");
///
/// send_email(&hook, &mut outbox, "k1").await.unwrap();
/// assert_eq!(plan.keys(&Route::post("/emails")), ["k1", "k1", "k1"]);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct FaultHook {
    plan: FaultPlan,
}

/// A request the hook let through to the provider; hand it to [`FaultHook::after_apply`] once
/// the provider has answered.
#[derive(Debug)]
#[must_use = "the hook says after the provider's answer whether the tool lost it"]
pub struct Sent {
    fault: Option<Fault>,
}

/// Why the hook kept a request from the provider: nothing was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotReached {
    /// The provider is unavailable: answer as to a `503`.
    #[error("the provider is unavailable (a planned fault)")]
    Unavailable,
    /// The provider is rate limited: answer as to a `429`.
    #[error("the provider is rate limited for {retry_after:?} (a planned fault)")]
    RateLimited {
        /// How long the provider asks the tool to wait.
        retry_after: Duration,
    },
}

/// How the provider's answer to an applied request was lost: act as if it never came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerLost {
    /// The provider never answered, and the tool's deadline passed.
    #[error(
        "the provider applied the request and did not answer before the deadline (a planned fault)"
    )]
    Timeout,
    /// The connection was reset before the answer.
    #[error("the provider applied the request and the connection was reset (a planned fault)")]
    Reset,
}

impl FaultHook {
    /// A hook that plays `plan` (a clone of one the test keeps).
    pub fn new(plan: FaultPlan) -> Self {
        FaultHook { plan }
    }

    /// The plan it plays, and the record of the requests the tool announced.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Records a request of `method` to `path` that the tool is about to send under `key`, and
    /// plays the part of its fault that comes before the provider: a refusal, or a delay (on
    /// tokio's clock, which a test with paused time moves by itself).
    ///
    /// # Errors
    ///
    /// [`NotReached`] when the plan keeps the request from the provider: the tool must not send
    /// it, and answers its own `unavailable` or rate-limited error (or `?` it into a
    /// [`ToolError`]).
    pub async fn before_send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
    ) -> Result<Sent, NotReached> {
        let (index, fault) = self
            .plan
            .arrive(method, path.to_owned(), key.map(str::to_owned));
        match fault {
            Some(Fault::Unavailable) => return Err(NotReached::Unavailable),
            Some(Fault::RateLimited { retry_after }) => {
                return Err(NotReached::RateLimited { retry_after });
            }
            Some(Fault::Delay(delay)) => {
                let waiting = self.plan.waiting(index);
                tokio::time::sleep(delay).await;
                waiting.sent();
            }
            _ => {}
        }
        self.plan.reach(index, Upstream::Sent);
        Ok(Sent { fault })
    }

    /// Plays the part of `sent`'s fault that comes after the provider applied it.
    ///
    /// # Errors
    ///
    /// [`AnswerLost`] when the plan loses the provider's answer: the tool drops what the
    /// provider answered and fails as its own timeout or dropped connection would (its
    /// [`ToolError`] is `outcome_unknown`).
    pub fn after_apply(&self, sent: Sent) -> Result<(), AnswerLost> {
        match sent.fault {
            Some(Fault::DropAfterApply) => Err(AnswerLost::Timeout),
            Some(Fault::ResetAfterApply) => Err(AnswerLost::Reset),
            _ => Ok(()),
        }
    }
}

impl From<NotReached> for ToolError {
    /// `unavailable`, or `rate_limited` with its `retry_after`: nothing was applied, and the
    /// runtime may retry.
    fn from(not_reached: NotReached) -> Self {
        let error = match not_reached {
            NotReached::Unavailable => ToolError::unavailable("the provider is unavailable"),
            NotReached::RateLimited { retry_after } => {
                ToolError::rate_limited("the provider is rate limited")
                    .with_retry_after(retry_after)
            }
        };
        error.with_why(not_reached.to_string())
    }
}

impl From<AnswerLost> for ToolError {
    /// `outcome_unknown`: the request was applied, and the tool cannot know it.
    fn from(lost: AnswerLost) -> Self {
        let what = match lost {
            AnswerLost::Timeout => "the provider did not answer in time",
            AnswerLost::Reset => "connection reset",
        };
        ToolError::outcome_unknown(what).with_why(lost.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::Route;
    use toolgate_core::ErrorKind;

    #[tokio::test]
    async fn each_fault_is_played_on_its_side_of_the_provider() {
        let plan = FaultPlan::new();
        let route = Route::post("/emails");
        let rate_limited = Fault::RateLimited {
            retry_after: Duration::from_secs(3),
        };
        for (number, fault) in [
            (1, Fault::Unavailable),
            (2, rate_limited),
            (3, Fault::DropAfterApply),
            (4, Fault::ResetAfterApply),
        ] {
            plan.at(route.clone(), [number], fault);
        }
        let hook = FaultHook::new(plan.clone());
        let send = || hook.before_send(Method::POST, "/emails", Some("k1"));
        assert_eq!(send().await.unwrap_err(), NotReached::Unavailable);
        assert_eq!(
            send().await.unwrap_err(),
            NotReached::RateLimited {
                retry_after: Duration::from_secs(3)
            }
        );
        let sent = send().await.unwrap();
        assert_eq!(hook.after_apply(sent), Err(AnswerLost::Timeout));
        let sent = send().await.unwrap();
        assert_eq!(hook.after_apply(sent), Err(AnswerLost::Reset));
        let sent = send().await.unwrap();
        assert_eq!(hook.after_apply(sent), Ok(()));
        let upstream: Vec<_> = plan
            .requests()
            .iter()
            .map(|record| (record.fault, record.upstream))
            .collect();
        assert_eq!(
            upstream,
            [
                (Some(Fault::Unavailable), Upstream::NotSent),
                (Some(rate_limited), Upstream::NotSent),
                (Some(Fault::DropAfterApply), Upstream::Sent),
                (Some(Fault::ResetAfterApply), Upstream::Sent),
                (None, Upstream::Sent),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_delay_waits_on_tokio_s_clock_then_lets_the_request_through() {
        let plan = FaultPlan::new();
        plan.next(Route::any("/"), 1, Fault::Delay(Duration::from_secs(90)));
        let hook = FaultHook::new(plan);
        let started = tokio::time::Instant::now();
        let sent = hook
            .before_send(Method::PUT, "/objects/a", None)
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(90));
        assert_eq!(hook.after_apply(sent), Ok(()));
        assert_eq!(hook.plan().requests()[0].upstream, Upstream::Sent);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_given_up_while_it_waits_is_abandoned() {
        let plan = FaultPlan::new();
        plan.next(Route::any("/"), 1, Fault::Delay(Duration::from_secs(90)));
        let hook = FaultHook::new(plan.clone());
        let gave_up = tokio::time::timeout(
            Duration::from_secs(10),
            hook.before_send(Method::PUT, "/objects/a", Some("k1")),
        )
        .await;
        assert!(gave_up.is_err());
        assert_eq!(plan.requests()[0].upstream, Upstream::Abandoned);
    }

    #[test]
    fn the_tool_errors_say_whether_anything_was_applied() {
        let cases = [
            (
                ToolError::from(NotReached::Unavailable),
                ErrorKind::Unavailable,
                None,
            ),
            (
                ToolError::from(NotReached::RateLimited {
                    retry_after: Duration::from_millis(1500),
                }),
                ErrorKind::RateLimited,
                Some(Duration::from_millis(1500)),
            ),
            (
                ToolError::from(AnswerLost::Timeout),
                ErrorKind::OutcomeUnknown,
                None,
            ),
            (
                ToolError::from(AnswerLost::Reset),
                ErrorKind::OutcomeUnknown,
                None,
            ),
        ];
        for (error, kind, retry_after) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
            assert_eq!(error.retry_after(), retry_after, "{error:?}");
            assert!(
                error
                    .why()
                    .is_some_and(|why| why.contains("a planned fault")),
                "{error:?}"
            );
        }
    }
}
