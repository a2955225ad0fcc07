//! The session hook of `mcp_server --http`: each request is identified by its bearer token,
//! looked up in the table given with `--token`.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate::AuthContext;
use toolgate::mcp::{Admitted, Peer, Refused, SessionHook};

/// The clients of the HTTP server, by bearer token: the caller each stands for.
///
/// Each is admitted as a caller, in the run of its MCP session: a new session of the same token
/// is a new run, never aborted by the last one's missing permission; a refund asked again in
/// it is answered from its record all the same (keys are scoped by tenant).
pub(crate) struct TokenTable {
    callers: HashMap<String, Arc<AuthContext>>,
}

impl TokenTable {
    /// The table of `tokens`, each with the identity it stands for.
    pub(crate) fn new(tokens: Vec<(String, AuthContext)>) -> Self {
        let callers = tokens
            .into_iter()
            .map(|(token, auth)| (token, Arc::new(auth)))
            .collect();
        TokenTable { callers }
    }
}

#[async_trait::async_trait]
impl SessionHook for TokenTable {
    async fn session(&self, peer: &Peer<'_>) -> Result<Admitted, Refused> {
        let Some(token) = peer.bearer_token() else {
            return Err(Refused::new(
                "send `Authorization: Bearer TOKEN` with a token this server was given",
            ));
        };
        match self.callers.get(token) {
            Some(auth) => Ok(Admitted::Caller(auth.clone())),
            None => Err(Refused::new(
                "the bearer token is not one this server knows: ask its operator for one",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use toolgate::mcp::TransportKind;

    use super::*;

    /// What `table` answers a call whose `Authorization` header is `authorization`.
    async fn ask(table: &TokenTable, authorization: Option<&str>) -> Result<Admitted, Refused> {
        let mut request = http::Request::post("/");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let parts = request.body(()).unwrap().into_parts().0;
        let peer = Peer::new(TransportKind::Http, "tools/call").with_http(&parts);
        table.session(&peer).await
    }

    #[tokio::test]
    async fn a_known_token_is_its_caller_every_time_and_no_other_token_is_anyone() {
        let table = TokenTable::new(vec![
            ("t1".to_owned(), AuthContext::new("acme", "desk")),
            ("t2".to_owned(), AuthContext::new("globex", "bot")),
        ]);
        let first = ask(&table, Some("Bearer t1")).await.unwrap();
        let other = ask(&table, Some("Bearer t2")).await.unwrap();
        assert!(
            matches!(first, Admitted::Caller(_)),
            "a run per MCP session"
        );
        assert_eq!(first.auth().tenant(), "acme");
        assert_eq!(other.auth().tenant(), "globex");

        let unknown = ask(&table, Some("Bearer t3")).await.unwrap_err();
        assert!(unknown.reason().contains("not one this server knows"));
        assert!(!unknown.reason().contains("t3"));
        let missing = ask(&table, None).await.unwrap_err();
        assert!(missing.reason().contains("Authorization: Bearer TOKEN"));
        let basic = ask(&table, Some("Basic dDE6")).await.unwrap_err();
        assert_eq!(basic, missing);
    }
}
