//! The text of a `tools/call`'s arguments as the client sent it, read from the request's text
//! before the SDK makes it a tree, so that the dispatcher reads the arguments as it reads every
//! other format's: a key given twice is `invalid_arguments`, where a tree would keep its last
//! value.

use rmcp::model::Extensions;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The arguments' text of one `tools/call` request, left in the request's extensions (or its
/// HTTP head's) by the transport that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawArguments(String);

/// The parts of a JSON-RPC request this module reads, borrowed from its text.
#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

impl RawArguments {
    /// The arguments' text of `message`, the text of one JSON-RPC message, when it is a
    /// `tools/call` request that gives them (absent or `null` arguments are none, as the SDK
    /// reads them: `{}`). `None` too for text the SDK will refuse, which gets its answer there.
    pub(crate) fn of_message(message: &[u8]) -> Option<RawArguments> {
        let request: Request<'_> = serde_json::from_slice(message).ok()?;
        if request.method != Some("tools/call") {
            return None;
        }
        let params: Params<'_> = serde_json::from_str(request.params?.get()).ok()?;
        let arguments = params.arguments?.get();
        (arguments != "null").then(|| RawArguments(arguments.to_owned()))
    }

    /// The arguments' text a transport left with a request: in its extensions, or in those of
    /// its HTTP head.
    pub(crate) fn of_request(extensions: &Extensions) -> Option<&str> {
        let raw = extensions.get::<RawArguments>().or_else(|| {
            extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<RawArguments>())
        });
        raw.map(|raw| raw.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Option<String> {
        RawArguments::of_message(text.as_bytes()).map(|raw| raw.0)
    }

    #[test]
    fn the_text_of_a_calls_arguments_is_kept_as_sent() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"refund","arguments":{"amount": 5, "amount": 5000}}}"#;
        assert_eq!(
            of(call).as_deref(),
            Some(r#"{"amount": 5, "amount": 5000}"#)
        );
        let params_first = r#"{"params":{"arguments":[1],"name":"x"},"method":"tools/call","id":"a","jsonrpc":"2.0"}"#;
        assert_eq!(of(params_first).as_deref(), Some("[1]"));
    }

    #[test]
    fn other_messages_and_calls_without_arguments_have_none() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "not json",
            "[]",
        ] {
            assert_eq!(of(text), None, "{text}");
        }
    }
}
