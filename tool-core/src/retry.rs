//! The retry policy a tool declares with `retry(...)`.
//!
//! The dispatcher retries transient faults below the model with exponential backoff and full
//! jitter ([`crate::Backoff`]): reads on any transient fault, writes only while the fault proves
//! nothing was applied.

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

/// The retry policy in force for one tool: its `retry(...)` settings over the defaults of its
/// side-effect class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first backoff delay.
    pub base: Duration,
    /// The largest backoff delay.
    pub max: Duration,
    /// Full jitter on every delay.
    pub jitter: bool,
}

impl RetryPolicy {
    /// Reads: 3 attempts from 100 ms up to 2 s. Writes and destructive calls: 3 attempts from
    /// 200 ms up to 5 s, and only while the fault proves nothing was applied. Full jitter.
    pub const fn defaults(side_effect: crate::SideEffect) -> Self {
        match side_effect {
            crate::SideEffect::Read => RetryPolicy {
                max_attempts: 3,
                base: Duration::from_millis(100),
                max: Duration::from_secs(2),
                jitter: true,
            },
            crate::SideEffect::Write | crate::SideEffect::Destructive => RetryPolicy {
                max_attempts: 3,
                base: Duration::from_millis(200),
                max: Duration::from_secs(5),
                jitter: true,
            },
        }
    }

    /// The policy of `descriptor`.
    pub fn of(descriptor: &crate::ToolDescriptor) -> Self {
        let defaults = RetryPolicy::defaults(descriptor.side_effect);
        let spec = descriptor.retry;
        RetryPolicy {
            max_attempts: spec.max_attempts.unwrap_or(defaults.max_attempts).max(1),
            base: spec.base.unwrap_or(defaults.base),
            max: spec.max.unwrap_or(defaults.max),
            jitter: spec.jitter.unwrap_or(defaults.jitter),
        }
    }
}
