//! The session hook of `mcp_server --http`: each request is identified by its bearer token,
//! looked up in the table given with `--token`.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use toolgate::mcp::{Peer, Refused, SessionHook};
use toolgate::{AuthContext, Session};

/// The clients of the HTTP server, by bearer token: one [`Session`] each, made at start-up.
///
/// So the run id is one per token for the life of the process: a refund asked again in a later
/// request (or a later MCP session) of the same token is answered from its record, and a call
/// that lacks a permission aborts that token's run until the server restarts.
pub(crate) struct TokenTable {
    sessions: HashMap<String, Session>,
}

impl TokenTable {
    /// The table of `tokens`, each with the identity it stands for.
    pub(crate) fn new(tokens: Vec<(String, AuthContext)>) -> Self {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let process = std::process::id();
        let sessions = tokens
            .into_iter()
            .enumerate()
            .map(|(number, (token, auth))| {
                // The run id never shows the token: it goes to the store and the audit trail.
                let run_id = format!("mcp-http-{process}-{started}-{}", number + 1);
                (token, Session::new(auth, run_id))
            })
            .collect();
        TokenTable { sessions }
    }
}

#[async_trait::async_trait]
impl SessionHook for TokenTable {
    async fn session(&self, peer: &Peer<'_>) -> Result<Session, Refused> {
        let Some(token) = peer.bearer_token() else {
            return Err(Refused::new(
                "send `Authorization: Bearer TOKEN` with a token this server was given",
            ));
        };
        self.sessions.get(token).cloned().ok_or_else(|| {
            Refused::new("the bearer token is not one this server knows: ask its operator for one")
        })
    }
}

#[cfg(test)]
mod tests {
    use toolgate::mcp::TransportKind;

    use super::*;

    /// What `table` answers a call whose `Authorization` header is `authorization`.
    async fn ask(table: &TokenTable, authorization: Option<&str>) -> Result<Session, Refused> {
        let mut request = http::Request::post("/");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let parts = request.body(()).unwrap().into_parts().0;
        let peer = Peer::new(TransportKind::Http, "tools/call").with_http(&parts);
        table.session(&peer).await
    }

    #[tokio::test]
    async fn a_known_token_is_its_session_every_time_and_no_other_token_is_anyone() {
        let table = TokenTable::new(vec![
            ("t1".to_owned(), AuthContext::new("acme", "desk")),
            ("t2".to_owned(), AuthContext::new("globex", "bot")),
        ]);
        let first = ask(&table, Some("Bearer t1")).await.unwrap();
        let again = ask(&table, Some("Bearer t1")).await.unwrap();
        let other = ask(&table, Some("Bearer t2")).await.unwrap();
        assert_eq!(first.auth().tenant(), "acme");
        assert_eq!(first.run_id(), again.run_id());
        assert_eq!(other.auth().tenant(), "globex");
        assert_ne!(first.run_id(), other.run_id());
        assert!(!first.run_id().contains("t1"));

        let unknown = ask(&table, Some("Bearer t3")).await.unwrap_err();
        assert!(unknown.reason().contains("not one this server knows"));
        assert!(!unknown.reason().contains("t3"));
        let missing = ask(&table, None).await.unwrap_err();
        assert!(missing.reason().contains("Authorization: Bearer TOKEN"));
        let basic = ask(&table, Some("Basic dDE6")).await.unwrap_err();
        assert_eq!(basic, missing);
    }
}
