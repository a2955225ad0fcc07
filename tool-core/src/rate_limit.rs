//! The per-tenant rate a tool declares with `rate_limit = "N/min"`.
//!
//! The rate is recorded in the descriptor and not enforced yet.

use std::time::Duration;

/// At most `count` calls per `per`, for each tenant.
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
