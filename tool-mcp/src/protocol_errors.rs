//! The JSON-RPC errors the server answers in place of a result, each with the code a client can
//! match on.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::json;
use toolgate_core::run::RunAborted;

use crate::hook::Refused;

/// The JSON-RPC error code of a request the [`SessionHook`](crate::SessionHook) refused
/// (`-32010`): the message is `Refused: ` and the hook's reason, which says what to do. Over
/// streamable HTTP it is the body of the `401` or `403` answer.
pub const SESSION_REFUSED: ErrorCode = ErrorCode(-32010);

/// The JSON-RPC error code of a `tools/call` in a run that is aborted (`-32011`): a missing
/// permission, revoked credentials, a policy violation or a spent run budget stopped the run,
/// this call or an earlier one. The message says why, `data` holds `kind` (such as
/// `permission_denied`) and `reason`; no call of the run runs any more.
pub const RUN_ABORTED: ErrorCode = ErrorCode(-32011);

/// The error answering a refused request.
pub(crate) fn refused(refused: &Refused) -> ErrorData {
    ErrorData::new(
        SESSION_REFUSED,
        format!("Refused: {}", refused.reason()),
        None,
    )
}

/// The error answering a call whose run is aborted.
pub(crate) fn run_aborted(aborted: &RunAborted) -> ErrorData {
    ErrorData::new(
        RUN_ABORTED,
        format!(
            "The run is aborted ({}): {}. No call of this run runs any more.",
            aborted.kind, aborted.reason
        ),
        Some(json!({"kind": aborted.kind.as_str(), "reason": aborted.reason})),
    )
}

/// The error of a call that ended without an answer: the pipeline panicked outside the tool
/// (a tool's own panic is a result of its own).
pub(crate) fn lost() -> ErrorData {
    ErrorData::internal_error(
        "the call ended without an answer: toolgate's pipeline panicked; a write it started may \
         have acted, so check before calling again",
        None,
    )
}

#[cfg(test)]
mod tests {
    use toolgate_core::ErrorKind;

    use super::*;

    #[test]
    fn each_error_says_why_with_its_own_code() {
        let error = refused(&Refused::new("send Authorization: Bearer TOKEN"));
        assert_eq!(error.code, SESSION_REFUSED);
        assert_eq!(error.message, "Refused: send Authorization: Bearer TOKEN");

        let aborted = RunAborted {
            kind: ErrorKind::PermissionDenied,
            reason: "the session may not call issue_refund".into(),
        };
        let error = run_aborted(&aborted);
        assert_eq!(error.code, RUN_ABORTED);
        assert_eq!(
            error.message,
            "The run is aborted (permission_denied): the session may not call issue_refund. \
             No call of this run runs any more."
        );
        assert_eq!(
            error.data,
            Some(
                json!({"kind": "permission_denied", "reason": "the session may not call issue_refund"})
            )
        );
        assert_ne!(SESSION_REFUSED, RUN_ABORTED);
    }
}
