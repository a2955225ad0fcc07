//! [`SessionHook`]: the application's answer to "who is this client?", asked for every request
//! that could reach a tool.

use async_trait::async_trait;
use toolgate_core::Session;

use crate::peer::Peer;

/// Maps an MCP client to the toolgate [`Session`] its requests run in, or refuses it.
///
/// The server asks on `initialize` (and `server/discover`, its stateless counterpart) and on
/// every `tools/list` and `tools/call`: over streamable HTTP each request carries its own
/// authorization, and from protocol version 2026-07-28 on, requests stand alone, with no
/// session to remember a decision in. A refused request is answered with the JSON-RPC error
/// [`SESSION_REFUSED`](crate::SESSION_REFUSED), whose message is the [`Refused`] reason: the
/// client fails to initialize, sees no tool list and can call nothing.
///
/// **The run id.** The session's run id scopes the run's counters and limits
/// ([`RunLimits`](toolgate_core::RunLimits)) and the idempotency keys of tools that opt into
/// `key_scope = "run"`; a call that lacks a permission aborts the run, after which every call of
/// it is refused. A write with the default `key_scope = "tenant"` is the same operation in every
/// run: repeated from another run, process or MCP session, it is a replay. The hook decides what
/// a run is:
///
/// - one per process, for a client that started the server ([`StdioSession`](crate::StdioSession));
/// - one per credential (a [`Session`] made once per bearer token and handed out again);
/// - one per legacy MCP session ([`Peer::session_id`]), for clients on protocol versions before
///   2026-07-28;
/// - one per request: then every request is a run of its own with limits of its own, and a
///   `key_scope = "run"` write repeated in another request runs again (its key differs). A hook
///   that does this must say so to its users.
///
/// Idempotency keys are scoped by tenant in any case: two tenants never share an operation.
///
/// A closure `Fn(&Peer) -> Result<Session, Refused>` is a hook:
///
/// ```
/// use toolgate::mcp::{Peer, Refused, SessionHook};
/// use toolgate::{AuthContext, Session};
///
/// let agent = Session::new(AuthContext::new("acme", "agent").with_permissions(["orders:read"]), "run-1");
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
    /// The toolgate session of a request, or why it is refused.
    async fn session(&self, peer: &Peer<'_>) -> Result<Session, Refused>;
}

#[async_trait]
impl<F> SessionHook for F
where
    F: Fn(&Peer<'_>) -> Result<Session, Refused> + Send + Sync + 'static,
{
    async fn session(&self, peer: &Peer<'_>) -> Result<Session, Refused> {
        self(peer)
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
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refused {
    reason: String,
}

impl Refused {
    /// A refusal saying `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Refused {
            reason: reason.into(),
        }
    }

    /// The reason, as the client reads it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}
