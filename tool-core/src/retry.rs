//! The retry policy a tool declares with `retry(...)`.
//!
//! Release 0.1 records the policy in the descriptor; the dispatcher runs every call once. Retries
//! below the model (exponential backoff with full jitter) arrive with the durable-execution release.

use std::time::Duration;

/// The `retry(max_attempts = .., base = "..", max = "..", jitter = ..)` settings of a tool.
///
/// Unset fields take the defaults of the tool's side-effect class when retries are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetrySpec {
    /// How many attempts in all, the first included.
    pub max_attempts: Option<u32>,
    /// The first backoff delay.
    pub base: Option<Duration>,
    /// The largest backoff delay.
    pub max: Option<Duration>,
    /// Whether delays use full jitter (a uniform draw between zero and the backoff).
    pub jitter: Option<bool>,
}

impl RetrySpec {
    /// No settings: every field takes its default.
    pub const fn new() -> Self {
        RetrySpec {
            max_attempts: None,
            base: None,
            max: None,
            jitter: None,
        }
    }

    /// True when the attribute set none of the fields.
    pub const fn is_unset(&self) -> bool {
        self.max_attempts.is_none()
            && self.base.is_none()
            && self.max.is_none()
            && self.jitter.is_none()
    }
}
