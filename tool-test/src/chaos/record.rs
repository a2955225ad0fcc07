//! [`Record`]: one request a [`FaultPlan`](super::FaultPlan) saw, and how far it got.

use http::{Method, StatusCode};

use super::{Fault, Route};

/// One request, as the proxy received it or the tool announced it to its hook.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Record {
    /// The request's method.
    pub method: Method,
    /// The request's path, without its query.
    pub path: String,
    /// The idempotency key it carried (the proxy's key header, or the key the tool gave its
    /// hook), if any.
    pub key: Option<String>,
    /// The fault played on it, or `None` when it was left alone.
    pub fault: Option<Fault>,
    /// How far it got towards the provider so far.
    pub upstream: Upstream,
}

impl Record {
    /// Whether the request is one of `route`'s.
    pub fn is_of(&self, route: &Route) -> bool {
        route.matches(&self.method, &self.path)
    }
}

/// How far a request got towards the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Upstream {
    /// Not sent: a fault answered in the provider's place, or the request is still waiting out
    /// a [`Fault::Delay`].
    NotSent,
    /// Never sent: its client gave up (or the proxy stopped) while it waited out a
    /// [`Fault::Delay`].
    Abandoned,
    /// Sent, and not answered yet. A hook's requests stay here: the tool reports no status.
    Sent,
    /// The provider answered with this status (whatever the client was then given).
    Answered(StatusCode),
    /// The proxy could not reach the provider, or the exchange broke before its answer ended;
    /// the client was answered `502 Bad Gateway`.
    Failed,
}
