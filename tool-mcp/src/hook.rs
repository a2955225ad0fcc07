//! [`SessionHook`]: the application's answer to "who is this client?", asked for every request
//! that could reach a tool.

use async_trait::async_trait;

use crate::admitted::Admitted;
use crate::peer::Peer;

/// Says who an MCP client is ([`Admitted`]: its caller, and the run its calls run in), or
/// refuses it.
///
/// On stdio and other byte streams the server asks on `initialize` (and `server/discover`, its
/// stateless counterpart) and on every `tools/list` and `tools/call`. Over streamable HTTP it
/// asks once for every HTTP request, whatever it carries (a `GET` of the session's stream and
/// the `DELETE` that ends a session too), before the request reaches the protocol: each request
/// carries its own authorization, and from protocol version 2026-07-28 on requests stand alone,
/// with no session to remember a decision in.
///
/// A refused request gets nothing but the refusal. Over HTTP that is `401 Unauthorized` with
/// `WWW-Authenticate: Bearer` for [`Refused::new`] (no credential, or one the hook does not
/// know: no session is made), or `403 Forbidden` for [`Refused::forbidden`]; on other
/// transports it is the JSON-RPC error [`SESSION_REFUSED`](crate::SESSION_REFUSED). The
/// [`Refused`] reason is the message either way: the client fails to initialize, sees no tool
/// list and can call nothing.
///
/// **The run.** Answer the caller ([`AuthContext`](toolgate_core::AuthContext)) and each MCP
/// session is a run of its own: its own counters and limits
/// ([`RunLimits`](toolgate_core::RunLimits)), and its own abort (a call that lacks a
/// permission aborts the session's run, never the next session's). Answer a
/// [`Session`](toolgate_core::Session) to name the run yourself; [`Admitted`] says when an
/// application would. Idempotency keys are scoped by tenant in any case: a write repeated in a
/// new session is a replay, and two tenants never share an operation.
///
/// **The catalog.** `tools/list` lists the tools the caller may call (those whose permission
/// it holds, and those that need none); a call of a tool the session was never shown and may
/// not call is answered as an unknown tool would be, and nothing runs. A tool that was listed
/// and whose permission the caller has since lost (the hook answered other permissions) aborts
/// the session's run when called, as a missing permission does in every format. A request of
/// protocol 2026-07-28 and later has no session: it is its own run, and its catalog is the
/// tools its caller may call when it comes.
///
/// A closure `Fn(&Peer) -> Result<A, Refused>`, where `A` is an
/// [`AuthContext`](toolgate_core::AuthContext), a [`Session`](toolgate_core::Session) or an
/// [`Admitted`], is a hook:
///
/// ```
/// use toolgate::AuthContext;
/// use toolgate::mcp::{Peer, Refused, SessionHook};
///
/// let agent = AuthContext::new("acme", "agent").with_permissions(["orders:read"]);
/// let hook = move |peer: &Peer<'_>| match peer.bearer_token() {
///     Some("s3cret") => Ok(agent.clone()),
///     Some(_) => Err(Refused::new("the bearer token is not known: ask your administrator for one")),
///     None => Err(Refused::new("send Authorization: Bearer TOKEN")),
/// };
/// # fn is_hook(_: &impl SessionHook) {}
/// # is_hook(&hook);
/// ```
#[async_trait]
pub trait SessionHook: Send + Sync + 'static {
    /// Who the client of a request is, or why it is refused.
    async fn session(&self, peer: &Peer<'_>) -> Result<Admitted, Refused>;
}

#[async_trait]
impl<F, A> SessionHook for F
where
    F: Fn(&Peer<'_>) -> Result<A, Refused> + Send + Sync + 'static,
    A: Into<Admitted>,
{
    async fn session(&self, peer: &Peer<'_>) -> Result<Admitted, Refused> {
        self(peer).map(Into::into)
    }
}

/// Why a [`SessionHook`] refused a request: a reason that tells the client what to do (send a
/// token, ask for access), never anything about other tenants.
///
/// ```
/// use toolgate::mcp::Refused;
///
/// let refused = Refused::new("send Authorization: Bearer TOKEN");
/// assert_eq!(refused.reason(), "send Authorization: Bearer TOKEN");
/// assert!(!refused.is_forbidden());
/// assert!(Refused::forbidden("this token may not use this server").is_forbidden());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refused {
    reason: String,
    forbidden: bool,
}

impl Refused {
    /// The client is not authenticated: it sent no credential, or one the hook does not
    /// know. Over HTTP: `401 Unauthorized` with `WWW-Authenticate: Bearer`.
    pub fn new(reason: impl Into<String>) -> Self {
        Refused {
            reason: reason.into(),
            forbidden: false,
        }
    }

    /// The client is authenticated, but may not use this server (or this transport). Over
    /// HTTP: `403 Forbidden`.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Refused {
            reason: reason.into(),
            forbidden: true,
        }
    }

    /// The reason, as the client reads it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Whether the client was authenticated and refused all the same ([`Refused::forbidden`]).
    pub fn is_forbidden(&self) -> bool {
        self.forbidden
    }
}
