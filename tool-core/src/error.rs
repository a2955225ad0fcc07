//! The errors a tool returns and the dispatcher produces, in the three classes of the contract:
//! retried in the runtime, returned to the model, or aborting the run.

use std::borrow::Cow;
use std::time::Duration;

/// What went wrong, as a caller can match on it.
///
/// Each kind belongs to one [`ErrorClass`] and has one name ([`ErrorKind::as_str`]), which no
/// other kind shares: the `error.kind` string of a result object, the kind of a stored attempt
/// error, the kind of a run abort.
///
/// Each kind has one meaning and one kind of advice ([`ErrorKind::advice`]): every `next` the
/// runtime writes for a kind opens with that advice's words, whatever raised it.
///
/// A kind compares equal to its name: `ErrorKind::NotFound == "not_found"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments are malformed or break the schema or a rule of the tool.
    InvalidArguments,
    /// The model named a tool that is not registered.
    UnknownTool,
    /// The thing the arguments name does not exist.
    NotFound,
    /// The request contradicts an earlier one (same key, other arguments) or current state.
    Conflict,
    /// A business rule refused the operation (for example a refund over the refundable balance).
    Refused,
    /// The call ran past its deadline before anything could have been applied.
    Timeout,
    /// The tool or its provider is rate limited; see [`ToolError::retry_after`].
    RateLimited,
    /// This call's retries are spent: the tool's retry budget in the run
    /// ([`RunLimits::retry_budget`](crate::RunLimits)) is used up, so the call did not run, or
    /// retries stopped on it. The model should stop calling the tool in this run.
    RetryBudgetExhausted,
    /// The same call already failed; repeating it would fail again. The dispatcher answers it,
    /// without running the tool, to a call of the same tool with the same canonical arguments
    /// after that call failed in the run with a kind for which [`ErrorKind::fails_again`] holds.
    /// A failure of the infrastructure (a store or provider that could not be reached, a
    /// timeout, a rate limit, an internal fault) is never repeated that way: the same call later
    /// runs, and the run's retry budget bounds it instead.
    RepeatedCall,
    /// The run's tool-call budget is spent: none of the turn's calls ran.
    CallBudgetExhausted,
    /// A fault in toolgate or the tool that the model cannot fix.
    Internal,
    /// The store or the provider could not be reached (a 503, a refused connection, a store
    /// that does not answer): nothing ran, and the same call may succeed in a moment. The
    /// runtime retries it under the tool's policy first; the model reads it once those attempts
    /// are spent.
    Unavailable,
    /// The request was sent but its outcome is unknown (a timeout or a dropped connection after
    /// sending). Never reported as a failure.
    OutcomeUnknown,
    /// A duplicate of the call is running now.
    InProgress,
    /// The operation is over its tool's approval threshold and waits for a human decision; it
    /// has not run. The result's status is `awaiting_approval`.
    AwaitingApproval,
    /// A human rejected the operation, its approval expired, or it failed the checks made again
    /// before an approved operation runs; it has not run. The result's status is `rejected`.
    Rejected,
    /// The session lacks a permission the tool requires. Aborts the run.
    PermissionDenied,
    /// The session's credentials were revoked. Aborts the run.
    CredentialsRevoked,
    /// The run's budget is spent. Aborts the run.
    RunBudgetExhausted,
    /// A policy forbids what the run is doing. Aborts the run.
    PolicyViolation,
}

/// Who handles an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The runtime may retry it under the tool's retry policy.
    Retry,
    /// The model sees it and can act on it.
    Model,
    /// The run stops; the model does not see the detail.
    Abort,
}

impl ErrorKind {
    /// Who handles this kind of error.
    pub const fn class(self) -> ErrorClass {
        match self {
            ErrorKind::Unavailable => ErrorClass::Retry,
            ErrorKind::PermissionDenied
            | ErrorKind::CredentialsRevoked
            | ErrorKind::RunBudgetExhausted
            | ErrorKind::PolicyViolation => ErrorClass::Abort,
            _ => ErrorClass::Model,
        }
    }

    /// Whether the same call, made again, would meet this failure again: the rule of repeat
    /// detection. A call of the same tool with the same canonical arguments, after a failure of
    /// such a kind in the run, is answered [`ErrorKind::RepeatedCall`] without running.
    ///
    /// It holds for what the call itself got wrong or what the system of record said of it:
    /// invalid arguments, not found, a conflict, a business rule's refusal. It never holds for a
    /// failure of the infrastructure (a store or provider that could not be reached, a timeout,
    /// a rate limit, an internal fault), for a state that changes by itself (in progress,
    /// awaiting approval, an unknown outcome: a repeat of a write is answered from its record),
    /// or for the runtime's own limits.
    ///
    /// ```
    /// use toolgate::ErrorKind;
    ///
    /// assert!(ErrorKind::NotFound.fails_again());
    /// assert!(!ErrorKind::Unavailable.fails_again());
    /// assert!(!ErrorKind::Internal.fails_again());
    /// ```
    pub const fn fails_again(self) -> bool {
        matches!(
            self,
            ErrorKind::InvalidArguments
                | ErrorKind::NotFound
                | ErrorKind::Conflict
                | ErrorKind::Refused
        )
    }

    /// The one kind of advice a result of this kind gives in its `next`.
    ///
    /// ```
    /// use toolgate::{error::Advice, ErrorKind};
    ///
    /// assert_eq!(ErrorKind::Unavailable.advice(), Advice::TryAgain);
    /// assert_eq!(ErrorKind::RetryBudgetExhausted.advice(), Advice::Stop);
    /// assert!(ErrorKind::Unavailable.advice().opens("try again in a moment"));
    /// ```
    pub const fn advice(self) -> Advice {
        match self {
            ErrorKind::InvalidArguments => Advice::FixArguments,
            ErrorKind::UnknownTool => Advice::CallAListedTool,
            ErrorKind::NotFound => Advice::CheckTheIdentifier,
            ErrorKind::Timeout | ErrorKind::Unavailable => Advice::TryAgain,
            ErrorKind::RateLimited => Advice::Wait,
            ErrorKind::Conflict
            | ErrorKind::Refused
            | ErrorKind::Internal
            | ErrorKind::InProgress
            | ErrorKind::Rejected => Advice::DoNotRepeat,
            ErrorKind::OutcomeUnknown => Advice::DoNotAssumeItFailed,
            ErrorKind::AwaitingApproval => Advice::TellTheUserItWaits,
            ErrorKind::RepeatedCall => Advice::ChangeTheApproach,
            ErrorKind::RetryBudgetExhausted
            | ErrorKind::CallBudgetExhausted
            | ErrorKind::PermissionDenied
            | ErrorKind::CredentialsRevoked
            | ErrorKind::RunBudgetExhausted
            | ErrorKind::PolicyViolation => Advice::Stop,
        }
    }

    /// The kind's name, `snake_case`, which no other kind shares: `not_found`,
    /// `retry_budget_exhausted`, `unavailable`, …
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Refused => "refused",
            ErrorKind::Timeout => "timeout",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::RetryBudgetExhausted => "retry_budget_exhausted",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::RepeatedCall => "repeated_call",
            ErrorKind::CallBudgetExhausted => "call_budget_exhausted",
            ErrorKind::Internal => "internal",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::InProgress => "in_progress",
            ErrorKind::AwaitingApproval => "awaiting_approval",
            ErrorKind::Rejected => "rejected",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::CredentialsRevoked => "credentials_revoked",
            ErrorKind::RunBudgetExhausted => "run_budget_exhausted",
            ErrorKind::PolicyViolation => "policy_violation",
        }
    }

    /// Every kind, in the order of the enum.
    pub const ALL: [ErrorKind; 20] = [
        ErrorKind::InvalidArguments,
        ErrorKind::UnknownTool,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Refused,
        ErrorKind::Timeout,
        ErrorKind::RateLimited,
        ErrorKind::RetryBudgetExhausted,
        ErrorKind::RepeatedCall,
        ErrorKind::CallBudgetExhausted,
        ErrorKind::Internal,
        ErrorKind::Unavailable,
        ErrorKind::OutcomeUnknown,
        ErrorKind::InProgress,
        ErrorKind::AwaitingApproval,
        ErrorKind::Rejected,
        ErrorKind::PermissionDenied,
        ErrorKind::CredentialsRevoked,
        ErrorKind::RunBudgetExhausted,
        ErrorKind::PolicyViolation,
    ];

    /// The kind named `name` ([`ErrorKind::as_str`]), if there is one.
    ///
    /// ```
    /// use toolgate::ErrorKind;
    ///
    /// assert_eq!(ErrorKind::from_name("repeated_call"), Some(ErrorKind::RepeatedCall));
    /// assert_eq!(ErrorKind::from_name("nope"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }

    /// The advice given when the error does not carry its own `next`: it opens with the
    /// words of [`ErrorKind::advice`].
    pub(crate) const fn default_next(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "fix the arguments as described and call the tool again",
            ErrorKind::UnknownTool => "call one of the tools listed",
            ErrorKind::NotFound => "check the identifier, or look it up first, then call again",
            ErrorKind::Conflict => "do not repeat this call; check the current state first",
            ErrorKind::Refused => "do not repeat this call; tell the user why it was refused",
            ErrorKind::Timeout => "try again in a moment, or tell the user the system is slow",
            ErrorKind::RateLimited => "wait before calling this tool again",
            ErrorKind::Unavailable => {
                "try again in a moment; if it keeps failing, tell the user the service is unavailable"
            }
            ErrorKind::RetryBudgetExhausted => {
                "stop calling this tool in this run; tell the user what could not be done"
            }
            ErrorKind::RepeatedCall => "that call already failed; change the approach",
            ErrorKind::CallBudgetExhausted => "stop calling tools and answer with what you have",
            ErrorKind::Internal => "do not repeat this call; tell the user something went wrong",
            ErrorKind::InProgress => {
                "do not repeat the call; it is running now, so check its result later"
            }
            ErrorKind::OutcomeUnknown => {
                "do not assume it failed; the outcome is being checked, so tell the user it is pending"
            }
            ErrorKind::AwaitingApproval => {
                "tell the user it waits for a human approval; call again with the same arguments later to learn the outcome"
            }
            ErrorKind::Rejected => "do not repeat this call; tell the user it was rejected and why",
            ErrorKind::PermissionDenied
            | ErrorKind::CredentialsRevoked
            | ErrorKind::RunBudgetExhausted
            | ErrorKind::PolicyViolation => "stop",
        }
    }
}

/// The one kind of advice each [`ErrorKind`] gives the model in a result's `next`
/// ([`ErrorKind::advice`]). Every `next` the runtime writes opens with the advice's words
/// ([`Advice::words`]), and may go on with what is particular to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Advice {
    /// Fix the arguments and call again: `invalid_arguments`.
    FixArguments,
    /// Call one of the tools that exist: `unknown_tool`.
    CallAListedTool,
    /// Check the identifier or look it up, then call again: `not_found`.
    CheckTheIdentifier,
    /// The same call may succeed in a moment: `unavailable`, `timeout` (of a read).
    TryAgain,
    /// Wait before calling again: `rate_limited`.
    Wait,
    /// Repeating the call will not help: `conflict`, `refused`, `internal`, `in_progress`,
    /// `rejected`.
    DoNotRepeat,
    /// The operation may have been applied; its outcome is being checked: `outcome_unknown`.
    DoNotAssumeItFailed,
    /// A human decides first: `awaiting_approval`.
    TellTheUserItWaits,
    /// That call already failed the same way: `repeated_call`.
    ChangeTheApproach,
    /// Stop calling (this tool, or any tool): the spent budgets and the kinds that abort a run.
    Stop,
}

impl Advice {
    /// The words every `next` of this advice opens with.
    pub const fn words(self) -> &'static str {
        match self {
            Advice::FixArguments => "fix ",
            Advice::CallAListedTool => "call one of",
            Advice::CheckTheIdentifier => "check the identifier",
            Advice::TryAgain => "try again",
            Advice::Wait => "wait ",
            Advice::DoNotRepeat => "do not repeat",
            Advice::DoNotAssumeItFailed => "do not assume it failed",
            Advice::TellTheUserItWaits => "tell the user",
            Advice::ChangeTheApproach => "that call already failed; change the approach",
            Advice::Stop => "stop",
        }
    }

    /// Whether `next` gives this advice: it opens with [`Advice::words`].
    pub fn opens(self, next: &str) -> bool {
        next.starts_with(self.words())
    }
}

/// The kind's name ([`ErrorKind::as_str`]).
impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as its name ([`ErrorKind::as_str`]).
impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A kind equals its name ([`ErrorKind::as_str`]).
impl PartialEq<str> for ErrorKind {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

/// A kind equals its name ([`ErrorKind::as_str`]).
impl PartialEq<&str> for ErrorKind {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

/// The error a tool returns, and the one the dispatcher reports: a kind plus the three-part
/// message the model reads (what happened, why, what to try next).
///
/// One naming scheme: a constructor named after the kind takes `what`; the optional parts are
/// added by builder methods named `with_` and the part ([`with_why`](ToolError::with_why),
/// [`with_next`](ToolError::with_next), [`with_retry_after`](ToolError::with_retry_after),
/// [`with_timed_out_after`](ToolError::with_timed_out_after),
/// [`with_may_still_be_running`](ToolError::with_may_still_be_running)), and every part reads
/// back by its own name, as [`kind`](ToolError::kind), [`class`](ToolError::class) and
/// [`what`](ToolError::what) do: [`why`](ToolError::why), [`next`](ToolError::next), …
///
/// ```
/// use toolgate::ToolError;
///
/// let err = ToolError::not_found("order ORD-9 does not exist")
///     .with_why("no order has that id")
///     .with_next("call get_order with one of ORD-1001, ORD-1002");
/// assert_eq!(err.kind(), toolgate::ErrorKind::NotFound);
/// assert_eq!(err.to_string(), "order ORD-9 does not exist");
/// assert_eq!(err.why(), Some("no order has that id"));
/// assert_eq!(err.next(), "call get_order with one of ORD-1001, ORD-1002");
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.what)]
pub struct ToolError(Box<Parts>);

/// What a [`ToolError`] holds, on the heap: an error is the rare path, and a small error keeps
/// every `Result` that may carry one small, on the path where none does.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parts {
    kind: ErrorKind,
    what: Cow<'static, str>,
    why: Option<Cow<'static, str>>,
    next: Option<Cow<'static, str>>,
    retry_after: Option<Duration>,
    timed_out_after: Option<Duration>,
    may_still_be_running: Option<bool>,
}

impl std::fmt::Debug for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Parts {
            kind,
            what,
            why,
            next,
            retry_after,
            timed_out_after,
            may_still_be_running,
        } = &*self.0;
        f.debug_struct("ToolError")
            .field("kind", kind)
            .field("what", what)
            .field("why", why)
            .field("next", next)
            .field("retry_after", retry_after)
            .field("timed_out_after", timed_out_after)
            .field("may_still_be_running", may_still_be_running)
            .finish()
    }
}

macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident => $kind:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(what: impl Into<Cow<'static, str>>) -> Self {
                ToolError::new(ErrorKind::$kind, what)
            }
        )*
    };
}

impl ToolError {
    /// An error of `kind` saying `what` happened.
    pub fn new(kind: ErrorKind, what: impl Into<Cow<'static, str>>) -> Self {
        ToolError(Box::new(Parts {
            kind,
            what: what.into(),
            why: None,
            next: None,
            retry_after: None,
            timed_out_after: None,
            may_still_be_running: None,
        }))
    }

    constructors! {
        /// The arguments break a rule of the tool.
        invalid_arguments => InvalidArguments;
        /// The thing named does not exist.
        not_found => NotFound;
        /// The request contradicts an earlier one or the current state.
        conflict => Conflict;
        /// A business rule refused the operation.
        refused => Refused;
        /// The call ran out of time before anything could have been applied.
        timeout => Timeout;
        /// The provider is rate limited; add [`ToolError::with_retry_after`] when it says how long.
        rate_limited => RateLimited;
        /// A transient fault that proves nothing was applied (503, connection refused).
        unavailable => Unavailable;
        /// The request was sent and its outcome is unknown (timeout or dropped connection).
        outcome_unknown => OutcomeUnknown;
        /// A fault the model cannot fix.
        internal => Internal;
        /// The session lacks a permission. Aborts the run.
        permission_denied => PermissionDenied;
        /// The session's credentials were revoked. Aborts the run.
        credentials_revoked => CredentialsRevoked;
        /// A policy forbids the call. Aborts the run.
        policy_violation => PolicyViolation;
    }

    /// Adds why it happened; read it with [`ToolError::why`].
    pub fn with_why(mut self, why: impl Into<Cow<'static, str>>) -> Self {
        self.0.why = Some(why.into());
        self
    }

    /// Adds what the model should try next; read it with [`ToolError::next`].
    pub fn with_next(mut self, next: impl Into<Cow<'static, str>>) -> Self {
        self.0.next = Some(next.into());
        self
    }

    /// Adds how long to wait before trying again; read it with [`ToolError::retry_after`].
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.0.retry_after = Some(after);
        self
    }

    /// Adds how long the call ran before its deadline stopped it (the model reads `after_ms`);
    /// read it with [`ToolError::timed_out_after`].
    pub fn with_timed_out_after(mut self, after: Duration) -> Self {
        self.0.timed_out_after = Some(after);
        self
    }

    /// Adds whether the work the call started may still be going on after the dispatcher
    /// stopped waiting (a provider applying a write, say); the model reads
    /// `may_still_be_running`. Read it with [`ToolError::may_still_be_running`].
    pub fn with_may_still_be_running(mut self, may: bool) -> Self {
        self.0.may_still_be_running = Some(may);
        self
    }

    /// How long the call ran before its deadline stopped it, if it timed out.
    pub fn timed_out_after(&self) -> Option<Duration> {
        self.0.timed_out_after
    }

    /// Whether the work may still be going on, when the error says.
    pub fn may_still_be_running(&self) -> Option<bool> {
        self.0.may_still_be_running
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Who handles it.
    pub fn class(&self) -> ErrorClass {
        self.0.kind.class()
    }

    /// What happened.
    pub fn what(&self) -> &str {
        &self.0.what
    }

    /// Why it happened, when known: what [`ToolError::with_why`] added.
    pub fn why(&self) -> Option<&str> {
        self.0.why.as_deref()
    }

    /// What to try next: the advice [`ToolError::with_next`] added, or the default for the kind.
    pub fn next(&self) -> &str {
        self.0.next.as_deref().unwrap_or(self.0.kind.default_next())
    }

    /// How long to wait before trying again, when [`ToolError::with_retry_after`] said.
    pub fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_contract() {
        assert_eq!(ErrorKind::Unavailable.class(), ErrorClass::Retry);
        assert_eq!(ErrorKind::PermissionDenied.class(), ErrorClass::Abort);
        assert_eq!(ErrorKind::PolicyViolation.class(), ErrorClass::Abort);
        assert_eq!(ErrorKind::Conflict.class(), ErrorClass::Model);
        assert_eq!(ErrorKind::OutcomeUnknown.class(), ErrorClass::Model);
    }

    /// Every kind has a name of its own, and compares equal to it.
    #[test]
    fn no_two_kinds_share_a_name() {
        let kinds = ErrorKind::ALL;
        let names: std::collections::HashSet<_> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), kinds.len());
        for kind in kinds {
            assert_eq!(kind, kind.as_str());
            assert_eq!(kind.to_string(), kind.as_str());
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert!(kind.advice().opens(kind.default_next()), "{kind}");
        }
        assert_eq!(ErrorKind::Unavailable.as_str(), "unavailable");
    }

    #[test]
    fn each_part_is_read_by_its_builder_name_with_get() {
        let err = ToolError::rate_limited("429")
            .with_why("too many calls")
            .with_next("wait a minute")
            .with_retry_after(Duration::from_secs(60));
        assert_eq!(err.why(), Some("too many calls"));
        assert_eq!(err.next(), "wait a minute");
        assert_eq!(err.retry_after(), Some(Duration::from_secs(60)));
        assert_eq!(err.what(), "429");
    }

    #[test]
    fn next_falls_back_to_the_kind_default() {
        let err = ToolError::repeated_call_for_test();
        assert_eq!(err.next(), "that call already failed; change the approach");
        let err = ToolError::refused("over balance").with_next("offer 100.00");
        assert_eq!(err.next(), "offer 100.00");
    }

    impl ToolError {
        fn repeated_call_for_test() -> Self {
            ToolError::new(ErrorKind::RepeatedCall, "x")
        }
    }
}
