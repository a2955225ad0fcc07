//! MCP (protocol 2026-07-28): `tools/list` items with annotations derived from the side-effect
//! class, `tools/call` JSON-RPC requests, and one JSON-RPC response per request, tool errors
//! flagged with `isError` and an unknown tool answered as a protocol error. A `null` where a
//! field is optional (`"arguments": null`) is an absent one; no requests get no responses.

use serde_json::{Value, json};

use super::parse::{CallParts, ReadCall, describe, missing_id, with_ids};
use super::raw_turn::ArgumentFields;
use super::{FormatError, Turn, WireFormat};
use crate::call::{CallReport, ToolCall, json_kind};
use crate::error::ErrorKind;
use crate::registry::Registry;
use crate::result::tree_of;
use crate::side_effect::SideEffect;

/// JSON-RPC's code for invalid method parameters, which MCP uses for an unknown tool.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for a request that is not a valid request object.
const INVALID_REQUEST: i64 = -32600;

/// MCP tools (`--format mcp`).
///
/// **Declarations** carry the canonical schema as `inputSchema` (MCP takes JSON Schema 2020-12)
/// and annotations from the side-effect class: a read is `readOnlyHint: true`; a write is not
/// destructive and is idempotent (`idempotentHint: true`, since toolgate runs a repeated write
/// once under its idempotency key); a destructive tool is `destructiveHint: true` and idempotent
/// for the same reason; every tool is `openWorldHint: true`.
///
/// **Call ids.** A call's id is the JSON text of the request's JSON-RPC id (`2` → `"2"`,
/// `"a"` → `"\"a\""`), so that rendering parses it back and echoes the id exactly, number or
/// string. A request whose id is missing or neither a string nor a number gets `missing_id_N`,
/// and its response is a JSON-RPC "Invalid Request" error with a `null` id.
///
/// **Results.** [`WireFormat::render_results`] answers one report with its response object
/// ([`Mcp::render_response`]), several with an array of responses, and none with nothing
/// (`None`: JSON-RPC never sends an empty batch).
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{Mcp, WireFormat};
///
/// let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
///     "params": {"name": "get_weather", "arguments": {"city": "Paris"}}});
/// let calls = Mcp.parse_calls(&request)?;
/// assert_eq!(calls[0].id, "2");
/// # Ok::<(), toolgate::provider::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mcp;

impl Mcp {
    /// The JSON-RPC response to one call: the call's answer ([`Mcp::call_result`]) under the
    /// request's id, or an "Invalid Request" error with a `null` id for a request whose id was
    /// unusable.
    pub fn render_response(report: &CallReport) -> Value {
        let id = serde_json::from_str::<Value>(&report.call_id)
            .ok()
            .filter(|id| id.is_string() || id.is_number());
        let Some(id) = id else {
            let error = JsonRpcError {
                code: INVALID_REQUEST,
                message: "Invalid Request: the request id must be a string or a number".into(),
            };
            return json!({"jsonrpc": "2.0", "id": null, "error": error.to_json()});
        };
        match Mcp::call_result(report) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result.to_json()}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
        }
    }

    /// What one `tools/call` answers: the `CallToolResult` object, or the protocol error that
    /// answers an unknown tool instead. This is the one rule every MCP answer of toolgate
    /// follows, here and in the `toolgate-mcp` server.
    ///
    /// The result holds `resultType: "complete"`, one text item whose text is the result
    /// object's JSON ([`CallResult::to_json_string`](crate::CallResult::to_json_string)),
    /// `structuredContent` = that object, and `isError` = the status
    /// [is flagged](crate::Status::is_flagged). A call of a tool the registry does not have is
    /// the error `-32602` `Unknown tool: NAME` (`Invalid params: the request names no tool` when
    /// the name is empty), as MCP asks; every other failure, invalid arguments included, is a
    /// result with `isError: true`, which the model reads.
    ///
    /// ```
    /// use toolgate::provider::Mcp;
    /// use toolgate::{dispatch::CallReport, CallResult, ErrorKind, ToolError};
    ///
    /// let unknown = CallReport {
    ///     call_id: "3".into(),
    ///     tool: "nope".into(),
    ///     result: CallResult::from_error(&ToolError::new(ErrorKind::UnknownTool, "no tool nope")),
    /// };
    /// let error = Mcp::call_result(&unknown).unwrap_err();
    /// assert_eq!((error.code, error.message.as_str()), (-32602, "Unknown tool: nope"));
    ///
    /// let missing = CallReport {
    ///     call_id: "4".into(),
    ///     tool: "get_order".into(),
    ///     result: CallResult::from_error(&ToolError::not_found("there is no order ORD-9")),
    /// };
    /// let result = Mcp::call_result(&missing).unwrap();
    /// assert!(result.is_error);
    /// assert_eq!(result.structured_content["error"]["kind"], "not_found");
    /// assert_eq!(result.to_json()["isError"], true);
    /// ```
    pub fn call_result(report: &CallReport) -> Result<CallToolAnswer, JsonRpcError> {
        let unknown_tool = report
            .result
            .error
            .as_ref()
            .is_some_and(|error| error.kind == ErrorKind::UnknownTool);
        if unknown_tool {
            let message = if report.tool.is_empty() {
                "Invalid params: the request names no tool".to_owned()
            } else {
                format!("Unknown tool: {}", report.tool)
            };
            return Err(JsonRpcError {
                code: INVALID_PARAMS,
                message,
            });
        }
        let text = report.result.to_json_string();
        Ok(CallToolAnswer {
            structured_content: tree_of(&text),
            text,
            is_error: report.result.status.is_flagged(),
        })
    }
}

/// The `CallToolResult` of one call ([`Mcp::call_result`]), as its parts, so that a server
/// builds its SDK's result type from them without a round trip through JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct CallToolAnswer {
    /// The text of the one text item of `content`: the result object's JSON.
    pub text: String,
    /// `structuredContent`: the result object.
    pub structured_content: Value,
    /// `isError`: whether the result's status is flagged.
    pub is_error: bool,
}

impl CallToolAnswer {
    /// The `CallToolResult` object: `resultType: "complete"`, the text item,
    /// `structuredContent` and `isError`.
    pub fn to_json(&self) -> Value {
        json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": self.text}],
            "structuredContent": self.structured_content,
            "isError": self.is_error,
        })
    }
}

/// A JSON-RPC error object: what MCP answers, in place of a result, to a request it does not
/// run ([`Mcp::call_result`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonRpcError {
    /// The JSON-RPC error code (`-32602` for an unknown tool).
    pub code: i64,
    /// The message, for the client.
    pub message: String,
}

impl JsonRpcError {
    /// `{"code": …, "message": …}`.
    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// The MCP tool annotations of a side-effect class.
fn annotations(side_effect: SideEffect) -> Value {
    match side_effect {
        SideEffect::Read => json!({"readOnlyHint": true, "openWorldHint": true}),
        SideEffect::Write => json!({
            "readOnlyHint": false,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": true,
        }),
        SideEffect::Destructive => json!({
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": true,
            "openWorldHint": true,
        }),
    }
}

impl WireFormat for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }

    /// `{"name", "description", "inputSchema", "annotations"}`: the `tools` of a `tools/list`
    /// result.
    fn catalog(&self, registry: &Registry) -> Vec<Value> {
        registry
            .iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                json!({
                    "name": descriptor.name,
                    "description": descriptor.model_description(),
                    "inputSchema": tool.schema(),
                    "annotations": annotations(descriptor.side_effect),
                })
            })
            .collect()
    }

    /// Reads one `tools/call` request (or an array of them). Absent `arguments` are `{}`; a
    /// request without `params.name`, or whose `arguments` is not an object, is a malformed
    /// call. Anything that is not a `tools/call` request is a [`FormatError`].
    ///
    /// From text, each call's arguments are read on their own.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError> {
        turn.read_with(self.name(), ARGUMENTS, |tree, fields| {
            self.read(tree, fields)
        })
    }

    /// One response object for one report ([`Mcp::render_response`]); an array of them (a
    /// JSON-RPC batch response) for several; `None` for none (JSON-RPC sends nothing rather
    /// than an empty batch).
    fn render_results(&self, reports: &[CallReport]) -> Option<Value> {
        match reports {
            [] => None,
            [report] => Some(Mcp::render_response(report)),
            _ => Some(reports.iter().map(Mcp::render_response).collect()),
        }
    }
}

/// The field of a request's `params` that holds the arguments.
const ARGUMENTS: &str = "arguments";

impl Mcp {
    fn read(&self, turn: &Value, fields: ArgumentFields) -> Result<Vec<ToolCall>, FormatError> {
        let requests = match turn {
            Value::Array(requests) => requests.as_slice(),
            _ => std::slice::from_ref(turn),
        };
        let calls = requests
            .iter()
            .map(|request| self.parse_request(request, fields))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(with_ids(calls, missing_id))
    }

    fn parse_request(
        &self,
        request: &Value,
        fields: ArgumentFields,
    ) -> Result<ReadCall, FormatError> {
        let error = |reason: String| FormatError {
            format: self.name(),
            reason,
        };
        let Value::Object(request) = request else {
            return Err(error(format!(
                "the request is {}, not a JSON-RPC request",
                json_kind(request)
            )));
        };
        match request.get("method") {
            Some(Value::String(method)) if method == "tools/call" => {}
            other => {
                return Err(error(format!(
                    "`method` is {}, not \"tools/call\"",
                    describe(other)
                )));
            }
        }
        let parts = match request.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => CallParts::with_id(id.to_string()),
            other => CallParts::unusable_id("id", other),
        };
        let params = request.get("params").and_then(Value::as_object);
        let parts = match params {
            Some(_) => parts,
            None => parts.problem(
                "the request has no params",
                format!("`params` is {}", describe(request.get("params"))),
            ),
        };
        let arguments = fields.field(params.and_then(|params| params.get(ARGUMENTS)));
        Ok(parts
            .name("params.name", params.and_then(|params| params.get("name")))
            .object_arguments("params.arguments", arguments, Some(json!({}))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_support::{
        failure, garbage_turns, registry, success, unknown_tool, weather_schema,
    };
    use crate::{CallResult, ToolError};

    #[test]
    fn declarations_carry_annotations_from_the_side_effect() {
        let catalog = Mcp.catalog(&registry());
        assert_eq!(
            catalog[0],
            json!({"name":"get_weather",
                "description":"Current weather for a city. Read-only: this tool changes nothing and is safe to call again.",
                "inputSchema": weather_schema(),
                "annotations":{"readOnlyHint":true,"openWorldHint":true}})
        );
        assert_eq!(
            catalog[1]["annotations"],
            json!({"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":true})
        );
        assert_eq!(
            catalog[2]["annotations"],
            json!({"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":true})
        );
        assert_eq!(catalog[4]["inputSchema"]["type"], "object");
    }

    #[test]
    fn parses_the_example_call_and_keeps_the_id_as_json_text() {
        let request = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Paris"}}});
        assert_eq!(
            Mcp.parse_calls(&request).unwrap(),
            vec![ToolCall::new("2", "get_weather", json!({"city": "Paris"}))]
        );
        let request =
            json!({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ping"}});
        assert_eq!(
            Mcp.parse_calls(&request).unwrap(),
            vec![ToolCall::new("\"a\"", "ping", json!({}))]
        );
    }

    #[test]
    fn ids_are_echoed_exactly() {
        for id in [json!(2), json!("a"), json!("2"), json!(-7), json!(1.5)] {
            let request = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"get_weather","arguments":{}}});
            let call = Mcp.parse_calls(&request).unwrap().remove(0);
            let response = Mcp::render_response(&success(&call.id));
            assert_eq!(response["id"], id);
        }
    }

    #[test]
    fn malformed_requests_still_yield_a_call_each() {
        let requests = json!([
            {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}},
            {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_weather","arguments":"{}"}},
            {"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_weather"}},
            {"jsonrpc":"2.0","id":4,"method":"tools/call"},
            {"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"get_weather"}},
        ]);
        let calls = Mcp.parse_calls(&requests).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "missing_id_2", "4", "missing_id_4"]);
        let problems: Vec<String> = calls
            .iter()
            .map(|call| call.arguments.clone().unwrap_err().what)
            .collect();
        assert_eq!(
            problems,
            [
                "the call names no tool",
                "the arguments are not a JSON object",
                "the call has no id",
                "the request has no params",
                "the call id is not usable",
            ]
        );
        let response = Mcp::render_response(&failure(&calls[2].id));
        assert_eq!(
            response,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the request id must be a string or a number"}})
        );
    }

    #[test]
    fn other_methods_and_garbage_are_format_errors_never_panics() {
        for turn in garbage_turns() {
            if let Ok(calls) = Mcp.parse_calls(&turn) {
                assert!(calls.iter().all(|call| !call.id.is_empty()));
            }
        }
        let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
        assert_eq!(
            Mcp.parse_calls(&list).unwrap_err().reason,
            r#"`method` is a string: "tools/list", not "tools/call""#
        );
        assert!(Mcp.parse_calls(&json!(3)).is_err());
    }

    #[test]
    fn responses_match_the_wire_shape() {
        let ok = Mcp::render_response(&success("2"));
        assert_eq!(
            ok,
            json!({"jsonrpc":"2.0","id":2,"result":{"resultType":"complete",
                "content":[{"type":"text","text":"{\"status\":\"succeeded\",\"replayed\":false,\"data\":{\"temp_c\":21}}"}],
                "structuredContent":{"status":"succeeded","replayed":false,"data":{"temp_c":21}},
                "isError":false}})
        );
        let err = Mcp::render_response(&failure("4"));
        assert_eq!(err["id"], 4);
        assert_eq!(err["result"]["isError"], true);
        assert_eq!(
            err["result"]["structuredContent"]["error"]["kind"],
            "not_found"
        );

        let unknown = Mcp::render_response(&unknown_tool("3", "invalid_tool_name"));
        assert_eq!(
            unknown,
            json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: invalid_tool_name"}})
        );
        let pending = CallReport {
            call_id: "\"r\"".into(),
            tool: "issue_refund".into(),
            result: CallResult::from_error(&ToolError::outcome_unknown("timed out")),
        };
        assert_eq!(Mcp::render_response(&pending)["result"]["isError"], true);
        assert_eq!(Mcp::render_response(&pending)["id"], "r");
    }

    /// The response is the call's answer under its id: one rule, [`Mcp::call_result`].
    #[test]
    fn responses_wrap_the_call_result() {
        for report in [success("1"), failure("2"), unknown_tool("3", "nope")] {
            let response = Mcp::render_response(&report);
            match Mcp::call_result(&report) {
                Ok(result) => assert_eq!(response["result"], result.to_json()),
                Err(error) => {
                    assert_eq!(response["error"], error.to_json());
                    assert!(response.get("result").is_none());
                }
            }
        }
        let nameless = unknown_tool("5", "");
        assert_eq!(
            Mcp::call_result(&nameless),
            Err(JsonRpcError {
                code: -32602,
                message: "Invalid params: the request names no tool".into()
            })
        );
    }

    #[test]
    fn one_report_is_one_response_and_several_an_array() {
        assert_eq!(
            Mcp.render_results(&[success("1")]),
            Some(Mcp::render_response(&success("1")))
        );
        let both = Mcp.render_results(&[success("1"), failure("2")]).unwrap();
        assert_eq!(both.as_array().unwrap().len(), 2);
        assert_eq!(both[1]["id"], 2);
        assert_eq!(Mcp.render_results(&[]), None);
    }
}
