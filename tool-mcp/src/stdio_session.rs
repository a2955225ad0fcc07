//! [`StdioSession`]: the hook of a server whose one client is whoever started the process.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use toolgate_core::{AuthContext, Session};

use crate::hook::{Refused, SessionHook};
use crate::peer::{Peer, TransportKind};

/// One [`Session`] for the life of the process, from the process's own configuration (its flags
/// or environment): the hook of a server on stdio, started by the one client it serves.
///
/// Every request gets a clone of the same session, so the run id is made once and stays the
/// same for the whole MCP session: a write repeated later is a replay, and the run's counters
/// and limits ([`RunLimits`](toolgate_core::RunLimits)) count every call of the session; a call
/// that lacks a permission aborts the run, and every later call of the process is refused (the
/// client starts a new process for a new run). [`StdioSession::new`] makes the run id
/// `mcp-PID-MILLIS` (the process id and the start time), so each process is a run of its own;
/// [`StdioSession::from_session`] takes a session, run id and all, from the application.
///
/// It refuses requests over HTTP: an HTTP client must be identified by its own request, never
/// handed the process's identity.
///
/// ```
/// use toolgate::AuthContext;
/// use toolgate::mcp::StdioSession;
///
/// let hook = StdioSession::new(AuthContext::new("acme", "desk").with_permissions(["orders:read"]));
/// assert!(hook.session().run_id().starts_with("mcp-"));
/// ```
#[derive(Debug, Clone)]
pub struct StdioSession {
    session: Session,
}

impl StdioSession {
    /// The session of `auth`, in a run made now for this process.
    pub fn new(auth: AuthContext) -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let run_id = format!("mcp-{}-{millis}", std::process::id());
        StdioSession::from_session(Session::new(auth, run_id))
    }

    /// Hands out clones of `session`.
    pub fn from_session(session: Session) -> Self {
        StdioSession { session }
    }

    /// The session every request runs in.
    pub fn session(&self) -> &Session {
        &self.session
    }
}

#[async_trait]
impl SessionHook for StdioSession {
    async fn session(&self, peer: &Peer<'_>) -> Result<Session, Refused> {
        match peer.transport() {
            TransportKind::Http => Err(Refused::new(
                "this server takes no HTTP clients: it serves the process that started it",
            )),
            _ => Ok(self.session.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_request_gets_the_same_run_and_http_gets_none() {
        let hook = StdioSession::new(AuthContext::new("acme", "desk"));
        let first = SessionHook::session(&hook, &Peer::new(TransportKind::Stdio, "initialize"))
            .await
            .unwrap();
        let second = SessionHook::session(&hook, &Peer::new(TransportKind::Stream, "tools/call"))
            .await
            .unwrap();
        assert_eq!(first.run_id(), second.run_id());
        assert_eq!(first.run_id(), hook.session().run_id());
        assert_eq!(first.auth().tenant(), "acme");
        let parts = http::Request::post("/mcp").body(()).unwrap().into_parts().0;
        let http = Peer::new(TransportKind::Http, "tools/list").with_http(&parts);
        let refused = SessionHook::session(&hook, &http).await.unwrap_err();
        assert!(refused.reason().contains("no HTTP clients"));
    }

    #[test]
    fn a_new_hook_makes_its_run_id_from_the_process() {
        let hook = StdioSession::new(AuthContext::new("acme", "desk"));
        let prefix = format!("mcp-{}-", std::process::id());
        assert!(hook.session().run_id().starts_with(&prefix));
        let given = StdioSession::from_session(Session::new(AuthContext::new("a", "b"), "run-9"));
        assert_eq!(given.session().run_id(), "run-9");
    }
}
