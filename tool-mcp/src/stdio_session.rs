//! [`StdioSession`]: the hook of a server whose one client is whoever started the process.

use std::sync::Arc;

use async_trait::async_trait;
use toolgate_core::{AuthContext, Session};

use crate::admitted::Admitted;
use crate::hook::{Refused, SessionHook};
use crate::peer::{Peer, TransportKind};

/// One caller for the life of the process, from the process's own configuration (its flags or
/// environment): the hook of a server on stdio, started by the one client it serves.
///
/// [`StdioSession::new`] admits every request as that caller, in the run of its MCP session
/// ([`Admitted::Caller`]): the connection is one MCP session, so one run. The run's counters and
/// limits ([`RunLimits`](toolgate_core::RunLimits)) count every call of the connection; a call
/// that lacks a permission aborts it, and every later call of the connection is refused; the
/// next connection (the client starts the process again) is a new run. A write repeated in it
/// is a replay all the same: keys are scoped by tenant, not by run.
/// [`StdioSession::from_session`] puts every request in a run the application names instead.
///
/// It refuses requests over HTTP: an HTTP client must be identified by its own request, never
/// handed the process's identity.
///
/// ```
/// use toolgate::AuthContext;
/// use toolgate::mcp::StdioSession;
///
/// let hook = StdioSession::new(AuthContext::new("acme", "desk").with_permissions(["orders:read"]));
/// assert_eq!(hook.auth().tenant(), "acme");
/// assert!(hook.run().is_none());
/// ```
#[derive(Debug, Clone)]
pub struct StdioSession {
    admitted: Admitted,
}

impl StdioSession {
    /// Admits every request as `auth`, in the run of its MCP session.
    pub fn new(auth: AuthContext) -> Self {
        StdioSession {
            admitted: Admitted::Caller(Arc::new(auth)),
        }
    }

    /// Admits every request in `session`, its run named by the application: every MCP session
    /// served with this hook shares that run, its limits and its abort.
    pub fn from_session(session: Session) -> Self {
        StdioSession {
            admitted: Admitted::InRun(session),
        }
    }

    /// The caller every request is admitted as.
    pub fn auth(&self) -> &AuthContext {
        self.admitted.auth()
    }

    /// The application's run, for a hook made [`from_session`](Self::from_session).
    pub fn run(&self) -> Option<&Session> {
        match &self.admitted {
            Admitted::InRun(session) => Some(session),
            Admitted::Caller(_) => None,
        }
    }
}

#[async_trait]
impl SessionHook for StdioSession {
    async fn session(&self, peer: &Peer<'_>) -> Result<Admitted, Refused> {
        match peer.transport() {
            TransportKind::Http => Err(Refused::forbidden(
                "this server takes no HTTP clients: it serves the process that started it",
            )),
            _ => Ok(self.admitted.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_request_is_the_same_caller_and_http_gets_none() {
        let hook = StdioSession::new(AuthContext::new("acme", "desk"));
        let first = SessionHook::session(&hook, &Peer::new(TransportKind::Stdio, "initialize"))
            .await
            .unwrap();
        let second = SessionHook::session(&hook, &Peer::new(TransportKind::Stream, "tools/call"))
            .await
            .unwrap();
        let (Admitted::Caller(first), Admitted::Caller(second)) = (first, second) else {
            panic!("a caller, in the run of its MCP session");
        };
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.tenant(), "acme");
        let parts = http::Request::post("/mcp").body(()).unwrap().into_parts().0;
        let http = Peer::new(TransportKind::Http, "tools/list").with_http(&parts);
        let refused = SessionHook::session(&hook, &http).await.unwrap_err();
        assert!(refused.reason().contains("no HTTP clients"));
        assert!(refused.is_forbidden());
    }

    #[tokio::test]
    async fn a_hook_from_a_session_admits_every_request_in_its_run() {
        let given = StdioSession::from_session(Session::new(AuthContext::new("a", "b"), "run-9"));
        assert_eq!(given.run().map(Session::run_id), Some("run-9"));
        let admitted = SessionHook::session(&given, &Peer::new(TransportKind::Stdio, "tools/call"))
            .await
            .unwrap();
        let Admitted::InRun(session) = admitted else {
            panic!("the application's run");
        };
        assert_eq!(session.run_id(), "run-9");
    }
}
