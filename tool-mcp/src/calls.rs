//! `tools/call`: the request as a toolgate [`ToolCall`], and the dispatcher's [`CallReport`] as
//! the MCP answer, by the rule [`Mcp::call_result`] keeps for every MCP answer of toolgate.

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, RequestId};
use serde_json::Value;
use toolgate_core::provider::Mcp;
use toolgate_core::{ToolCall, dispatch::CallReport};

/// The call a `tools/call` request makes: its id is the JSON text of the request's id (`2` →
/// `"2"`, `"a"` → `"\"a\""`), as [`Mcp`] parses calls; its arguments are `raw`, their text as
/// the client sent it, when the transport kept it (so a key given twice is refused, as in
/// every format), else the SDK's tree of them; absent arguments are `{}`.
pub(crate) fn tool_call(
    id: &RequestId,
    params: CallToolRequestParams,
    raw: Option<&str>,
) -> ToolCall {
    let id = serde_json::to_string(id).expect("a request id serializes");
    if let Some(raw) = raw {
        return ToolCall::from_json_text(id, params.name, raw);
    }
    let arguments = params
        .arguments
        .map_or_else(|| Value::Object(serde_json::Map::new()), Value::Object);
    ToolCall::new(id, params.name, arguments)
}

/// The answer to a call: the `CallToolResult` (`isError` set when the status is flagged,
/// `structuredContent` the result object), or the protocol error `-32602 Unknown tool: NAME`.
pub(crate) fn answer(report: &CallReport) -> Result<CallToolResult, ErrorData> {
    match Mcp::call_result(report) {
        Ok(answer) => {
            // Built from its parts: a trip through `serde_json::Value` and the SDK's
            // deserializer costs more than the rest of the server's work on a call.
            let mut result = if answer.is_error {
                CallToolResult::error(vec![ContentBlock::text(answer.text)])
            } else {
                CallToolResult::success(vec![ContentBlock::text(answer.text)])
            };
            result.structured_content = Some(answer.structured_content);
            Ok(result)
        }
        Err(error) => {
            let code = i32::try_from(error.code).map_or(ErrorCode::INTERNAL_ERROR, ErrorCode);
            Err(ErrorData::new(code, error.message, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;
    use serde_json::json;
    use toolgate_core::{CallResult, ErrorKind, Status, ToolError};

    use super::*;

    fn params(name: &str, arguments: Option<Value>) -> CallToolRequestParams {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.map(|value| match value {
            Value::Object(map) => map,
            other => panic!("arguments are an object, not {other}"),
        });
        params
    }

    #[test]
    fn the_call_id_is_the_request_id_as_json_text_and_no_arguments_are_empty() {
        let call = tool_call(&NumberOrString::Number(2), params("get_order", None), None);
        assert_eq!(call, ToolCall::new("2", "get_order", json!({})));
        let call = tool_call(
            &NumberOrString::String("a".into()),
            params("get_order", Some(json!({"order_id": "ORD-1"}))),
            None,
        );
        assert_eq!(
            call,
            ToolCall::new("\"a\"", "get_order", json!({"order_id": "ORD-1"}))
        );
    }

    #[test]
    fn arguments_kept_as_text_are_read_as_text_so_a_key_given_twice_is_refused() {
        let tree = params("issue_refund", Some(json!({"amount": 5000})));
        let call = tool_call(
            &NumberOrString::Number(3),
            tree,
            Some(r#"{"amount": 5, "amount": 5000}"#),
        );
        assert_eq!(call.name, "issue_refund");
        let malformed = call.arguments.unwrap_err();
        assert_eq!(
            malformed.what,
            r#"the arguments give the key "amount" more than once"#
        );
        let call = tool_call(
            &NumberOrString::Number(4),
            params("get_order", None),
            Some(r#"{"order_id": "ORD-1"}"#),
        );
        assert_eq!(
            call,
            ToolCall::new("4", "get_order", json!({"order_id": "ORD-1"}))
        );
    }

    fn report(tool: &str, result: CallResult) -> CallReport {
        CallReport {
            call_id: "7".into(),
            tool: tool.into(),
            result,
        }
    }

    #[test]
    fn answers_follow_the_mcp_format() {
        let found = report(
            "get_order",
            CallResult::from_error(&ToolError::not_found("there is no order ORD-9")),
        );
        let result = answer(&found).unwrap();
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            Mcp::call_result(&found).unwrap().to_json()
        );
        assert_eq!(result.is_error, Some(true));
        assert_eq!(found.result.status, Status::Error);

        let unknown = report(
            "nope",
            CallResult::from_error(&ToolError::new(ErrorKind::UnknownTool, "no such tool")),
        );
        let error = answer(&unknown).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, "Unknown tool: nope");
    }
}
