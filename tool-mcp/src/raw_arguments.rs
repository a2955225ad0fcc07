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

    /// [`of_message`](Self::of_message) for the text of a message the SDK read as a
    /// `tools/call` request, so valid JSON: found in one pass over its bytes, without building
    /// anything, unless a key on the way is escaped or given twice (then read as
    /// [`of_message`](Self::of_message) reads it).
    pub(crate) fn of_call(message: &[u8]) -> Option<RawArguments> {
        match scan::arguments(message) {
            scan::Found::Arguments(arguments) => {
                let arguments = std::str::from_utf8(arguments).ok()?;
                (arguments != "null").then(|| RawArguments(arguments.to_owned()))
            }
            scan::Found::None => None,
            scan::Found::Unsure => Self::of_message(message),
        }
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

/// A scan of valid JSON for `params.arguments`, byte by byte.
mod scan {
    /// What a scan found.
    pub(super) enum Found<'a> {
        /// The text of the value of `params.arguments`.
        Arguments(&'a [u8]),
        /// The message has no `params.arguments`.
        None,
        /// A key on the way is escaped, or `params` or `arguments` is given twice: read it with
        /// a parser.
        Unsure,
    }

    /// `params.arguments` of `text`, valid JSON holding one object: one pass, which follows the
    /// nesting, skips strings whole, and notes the keys of the top object and of `params`.
    pub(super) fn arguments(text: &[u8]) -> Found<'_> {
        let mut depth = 0usize;
        // The next string is a key: just after `{`, or after `,` in an object.
        let mut key_next = false;
        // Whether the containers at depths 1 and 2 are objects.
        let mut objects = [false; 3];
        // The last key of the top object, and whether the object at depth 2 is `params`.
        let mut top_key: &[u8] = b"";
        let mut in_params = false;
        // Where the value of `params.arguments` starts (once its `:` is passed), and its span.
        let mut arguments_key = false;
        let mut start = None;
        let mut span = None;
        let (mut params_given, mut arguments_given) = (0, 0);
        let mut at = 0;
        while at < text.len() {
            let byte = text[at];
            match byte {
                b'"' => {
                    let opened = at + 1;
                    at = opened;
                    let mut escaped = false;
                    loop {
                        match text.get(at) {
                            Some(b'"') => break,
                            Some(b'\\') => {
                                escaped = true;
                                at += 2;
                            }
                            Some(_) => at += 1,
                            None => return Found::Unsure,
                        }
                    }
                    if key_next && (depth == 1 || (depth == 2 && in_params)) {
                        if escaped {
                            return Found::Unsure;
                        }
                        let key = &text[opened..at];
                        if depth == 1 {
                            top_key = key;
                            params_given += usize::from(key == b"params");
                        } else {
                            arguments_key = key == b"arguments";
                            arguments_given += usize::from(arguments_key);
                        }
                    }
                    key_next = false;
                }
                b':' if depth == 2 && in_params && arguments_key && start.is_none() => {
                    start = Some(at + 1);
                }
                b'{' | b'[' => {
                    depth += 1;
                    key_next = byte == b'{';
                    if depth <= 2 {
                        objects[depth] = byte == b'{';
                    }
                    if depth == 2 {
                        in_params = byte == b'{' && top_key == b"params";
                    }
                }
                b',' | b'}' | b']' => {
                    if depth == 2
                        && in_params
                        && let Some(from) = start.take()
                    {
                        span = Some((from, at));
                        arguments_key = false;
                    }
                    if byte == b',' {
                        key_next = depth <= 2 && objects[depth];
                    } else {
                        let Some(outer) = depth.checked_sub(1) else {
                            return Found::Unsure;
                        };
                        depth = outer;
                        key_next = false;
                        if depth < 2 {
                            in_params = false;
                        }
                    }
                }
                _ => {}
            }
            at += 1;
        }
        if params_given > 1 || arguments_given > 1 {
            return Found::Unsure;
        }
        match span {
            Some((from, to)) => Found::Arguments(text[from..to].trim_ascii()),
            None => Found::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Option<String> {
        let read = RawArguments::of_message(text.as_bytes()).map(|raw| raw.0);
        if read.is_some() {
            // The scan finds what the parser finds.
            let scanned = RawArguments::of_call(text.as_bytes()).map(|raw| raw.0);
            assert_eq!(scanned, read, "{text}");
        }
        read
    }

    #[test]
    fn the_scan_finds_what_the_parser_finds_and_defers_to_it_when_unsure() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\"}","arguments":{"s":"}]\\","n":[1,{"x":null}]}}}"#,
            r#" { "params" : { "_meta" : {"k": [1, "x"]} , "arguments" : { } , "name" : "t" } , "id" : "7", "method" : "tools/call" } "#,
            r#"{"method":"tools/call","id":2,"params":{"name":"t","arguments":{"a":1},"task":{"ttl":5}}}"#,
            r#"{"method":"tools/call","id":2,"params":{"_meta":[{"x":"["},[]],"arguments":{"a":[[1,"]"],{"b":"{\\\""}]},"name":"t"}}"#,
            r#"{"method":"tools/call","id":2,"params":{"\u0061rguments":{"a":1},"name":"t"}}"#,
            r#"{"method":"tools/call","id":2,"params":{"name":"t","arguments":{"a":1, "a":2}}}"#,
        ] {
            assert!(of(text).is_some(), "{text}");
        }
        let none = r#"{"method":"tools/call","id":2,"params":{"name":"t","arguments":null}}"#;
        assert_eq!(RawArguments::of_call(none.as_bytes()), None);
        let absent = r#"{"method":"tools/call","id":2,"params":{"name":"t"}}"#;
        assert_eq!(RawArguments::of_call(absent.as_bytes()), None);
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
