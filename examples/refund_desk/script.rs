//! The lines of a refund desk script (`examples/scenarios/README.md`): JSON Lines, one object a line
//! with exactly one key.

use serde::Deserialize;
use serde_json::Value;
use toolgate::AuthContext;

/// One line of a script.
#[derive(Debug)]
pub(crate) enum Line {
    /// The authenticated context for the turns that follow.
    Session(AuthContext),
    /// A new agent run with this id.
    Run(String),
    /// One model turn.
    Turn(Dialect, Value),
    /// The next requests of a provider operation misbehave: the `fault` object, for the provider.
    Fault(Value),
    /// Run the reconciler once.
    Reconcile,
    /// Drop the dispatcher and reopen the store.
    Restart,
    /// `approve` or `reject`: decide the operations waiting for approval.
    Decide(&'static str),
}

/// The provider format of a model turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// An OpenAI Chat Completions assistant message with `tool_calls`.
    OpenAi,
    /// An Anthropic Messages assistant message with `tool_use` blocks.
    Anthropic,
}

impl Dialect {
    /// The line's key, which is also the answer's.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
        }
    }
}

/// The object of a `session` line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionLine {
    tenant: String,
    user: String,
    #[serde(default)]
    permissions: Vec<String>,
}

const KEYS: &str = "session, run, openai, anthropic, fault, reconcile, restart, approve, reject";

impl Line {
    /// The line `text`, or what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Line, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|err| format!("not a JSON object: {err}"))?;
        let Value::Object(map) = value else {
            return Err("not a JSON object".to_owned());
        };
        let mut entries = map.into_iter();
        let (Some((key, value)), None) = (entries.next(), entries.next()) else {
            return Err(format!("a line has exactly one key, one of {KEYS}"));
        };
        let object = |value: Value| match value {
            Value::Object(_) => Ok(value),
            other => Err(format!("`{key}` takes an object, not {other}")),
        };
        Ok(match key.as_str() {
            "session" => {
                let session: SessionLine =
                    serde_json::from_value(value).map_err(|err| format!("a bad session: {err}"))?;
                Line::Session(
                    AuthContext::new(session.tenant, session.user)
                        .with_permissions(session.permissions),
                )
            }
            "run" => match value {
                Value::String(run) if !run.is_empty() => Line::Run(run),
                other => return Err(format!("`run` takes a non-empty string, not {other}")),
            },
            "openai" => Line::Turn(Dialect::OpenAi, object(value)?),
            "anthropic" => Line::Turn(Dialect::Anthropic, object(value)?),
            "fault" => Line::Fault(object(value)?),
            "reconcile" => {
                object(value)?;
                Line::Reconcile
            }
            "restart" => {
                object(value)?;
                Line::Restart
            }
            "approve" => Line::Decide("approve"),
            "reject" => Line::Decide("reject"),
            other => return Err(format!("unknown line `{other}`: use one of {KEYS}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_format_parses() {
        let session =
            r#"{"session": {"tenant": "acme", "user": "agent-7", "permissions": ["orders:read"]}}"#;
        match Line::parse(session).unwrap() {
            Line::Session(auth) => {
                assert_eq!(auth.tenant(), "acme");
                assert!(auth.has_permission("orders:read"));
                assert!(!auth.has_permission("refund:create"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(Line::parse(r#"{"run": "r1"}"#), Ok(Line::Run(run)) if run == "r1"));
        assert!(matches!(
            Line::parse(r#"{"anthropic": {"role": "assistant", "content": []}}"#),
            Ok(Line::Turn(Dialect::Anthropic, _))
        ));
        assert!(matches!(
            Line::parse(r#"{"reconcile": {}}"#),
            Ok(Line::Reconcile)
        ));
        assert!(matches!(
            Line::parse(r#"{"restart": {}}"#),
            Ok(Line::Restart)
        ));
        assert!(matches!(
            Line::parse(r#"{"approve": {"reason": "ok"}}"#),
            Ok(Line::Decide("approve"))
        ));
    }

    #[test]
    fn a_bad_line_says_what_is_wrong() {
        for (line, needle) in [
            ("{", "not a JSON object"),
            ("[1]", "not a JSON object"),
            (r#"{"run": "a", "restart": {}}"#, "exactly one key"),
            ("{}", "exactly one key"),
            (r#"{"rerun": "a"}"#, "unknown line `rerun`"),
            (r#"{"run": 5}"#, "non-empty string"),
            (r#"{"openai": "hi"}"#, "takes an object"),
            (r#"{"session": {"tenant": "acme"}}"#, "missing field `user`"),
        ] {
            let err = Line::parse(line).unwrap_err();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }
}
