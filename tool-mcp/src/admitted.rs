//! [`Admitted`]: who a [`SessionHook`](crate::SessionHook) lets in, and the run their calls run
//! in.

use std::sync::Arc;

use toolgate_core::{AuthContext, Session};

/// Who a request's client is, as the [`SessionHook`](crate::SessionHook) admits it, and whose
/// run its calls belong to.
///
/// - **A caller** ([`AuthContext`], or an `Arc` of one): the calls run in the run of the client's
///   MCP session, which the server makes when the session starts. Each MCP session is a run of
///   its own: a stdio connection, a streamable HTTP session (`Mcp-Session-Id`), or, for requests
///   of protocol 2026-07-28 and later, which have no session, each request. A new session is a
///   new run, with limits and counters of its own and never aborted by another session's call.
///   The run is [unshared](Session::unshared): its counters live in the MCP session, so a read
///   asks the store nothing on its path. This is the default, and what a hook should answer
///   unless the application has runs of its own.
/// - **A session** ([`Session`]): the calls run in the run the application names, with that
///   session's limits, counters and abort, across every MCP session the hook hands it to. An
///   application does this when a run is its own notion, longer or shorter than an MCP session:
///   a conversation it keeps and resumes across connections, say, or a run id it reads from the
///   request (a header its gateway sets). Then a call that aborts the run aborts it for every
///   MCP session in it, until the application hands out another run id.
///
/// Idempotency keys do not depend on it: a write with the default `key_scope = "tenant"` is the
/// same operation in every run, so repeated in a new session it is answered from its record.
///
/// ```
/// use toolgate::mcp::Admitted;
/// use toolgate::{AuthContext, Session};
///
/// let caller: Admitted = AuthContext::new("acme", "agent").into();
/// assert!(matches!(caller, Admitted::Caller(_)));
/// let named: Admitted = Session::new(AuthContext::new("acme", "agent"), "conversation-42").into();
/// assert!(matches!(named, Admitted::InRun(_)));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Admitted {
    /// The caller, in the run of its MCP session.
    Caller(Arc<AuthContext>),
    /// The caller and the run the application names.
    InRun(Session),
}

impl Admitted {
    /// The caller admitted.
    pub fn auth(&self) -> &AuthContext {
        match self {
            Admitted::Caller(auth) => auth,
            Admitted::InRun(session) => session.auth(),
        }
    }
}

impl From<AuthContext> for Admitted {
    fn from(auth: AuthContext) -> Self {
        Admitted::Caller(Arc::new(auth))
    }
}

impl From<Arc<AuthContext>> for Admitted {
    fn from(auth: Arc<AuthContext>) -> Self {
        Admitted::Caller(auth)
    }
}

impl From<Session> for Admitted {
    fn from(session: Session) -> Self {
        Admitted::InRun(session)
    }
}
