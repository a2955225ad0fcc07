//! What the model sees for one call: one JSON object, `{"status": …}`.

use serde::Serialize;
use serde_json::Value;

use crate::error::{ErrorClass, ErrorKind, ToolError};
use crate::json_text::{JsonText, escape_into};
use crate::steps::{StepError, StepReport};
use crate::store::EventStatus;

/// The `status` of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// The operation happened; `data` holds its result.
    Succeeded,
    /// The operation definitely did not happen.
    Failed,
    /// The request was sent and nobody knows yet whether it was applied.
    OutcomeUnknown,
    /// A duplicate of this call is running now.
    InProgress,
    /// The operation waits for a human decision.
    AwaitingApproval,
    /// A human rejected the operation.
    Rejected,
    /// Some steps succeeded and some did not; `steps` names each.
    Partial,
    /// Accepted: the operation's records are committed and its delivery to the provider is
    /// queued (an outbox tool); the provider has not acted yet. `data` holds the tool's result,
    /// `delivery` how far the delivery got.
    Queued,
    /// The call was not carried out; `error` says why and what to do.
    Error,
}

impl Status {
    /// The wire name: `succeeded`, `outcome_unknown`, …
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::OutcomeUnknown => "outcome_unknown",
            Status::InProgress => "in_progress",
            Status::AwaitingApproval => "awaiting_approval",
            Status::Rejected => "rejected",
            Status::Partial => "partial",
            Status::Queued => "queued",
            Status::Error => "error",
        }
    }

    /// Whether provider formats with an error flag (Anthropic `is_error`, MCP `isError`, Gemini
    /// `response.error`) set it for this status. An unknown outcome is flagged so the model does
    /// not take it for a success; its text never calls it a failure.
    pub const fn is_flagged(self) -> bool {
        matches!(
            self,
            Status::Failed | Status::OutcomeUnknown | Status::Rejected | Status::Error
        )
    }
}

/// The explanation carried by a result that is not a plain success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Explanation {
    /// The kind the model reads in `error.kind`.
    pub kind: ErrorKind,
    /// What happened.
    pub what: String,
    /// Why, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What to try next.
    pub next: String,
    /// How long to wait before calling again, in milliseconds (`rate_limited`, and a provider
    /// that said when to come back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// How long the call ran before its deadline stopped it, in milliseconds (a timeout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<u64>,
    /// Whether the work may still be going on after the dispatcher stopped waiting for it (a
    /// timed-out write the provider may still apply: `true`; a read that was stopped: `false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub may_still_be_running: Option<bool>,
    /// The approval the operation waits for or was rejected under (`awaiting_approval`,
    /// `rejected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Until when the approval may be decided, in milliseconds since the Unix epoch; afterwards
    /// it is rejected as expired (`awaiting_approval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

impl From<&ToolError> for Explanation {
    fn from(err: &ToolError) -> Self {
        let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Explanation {
            kind: err.kind(),
            what: err.what().to_owned(),
            why: err.why().map(str::to_owned),
            next: err.next().to_owned(),
            retry_after_ms: err.retry_after().map(millis),
            after_ms: err.timed_out_after().map(millis),
            may_still_be_running: err.may_still_be_running(),
            approval_id: None,
            expires_at_ms: None,
        }
    }
}

/// The result object of one call: what the model sees, and what the application matches on.
///
/// As JSON, `replayed` is present on every status but `error`; `data` on a success; `error`
/// (kind, what, why, next) on every other status. The application reads it typed instead:
/// [`CallResult::outcome`] to match on, or the accessors [`CallResult::data`],
/// [`CallResult::error_kind`], [`CallResult::explanation`].
///
/// ```
/// use toolgate::{CallResult, ErrorKind, dispatch::Outcome, ToolError};
///
/// let data = toolgate::tool::JsonText::of(&serde_json::json!({"refund_id": "re_1"})).unwrap();
/// let ok = CallResult::succeeded(data);
/// assert_eq!(
///     ok.to_json_string(),
///     r#"{"status":"succeeded","replayed":false,"data":{"refund_id":"re_1"}}"#
/// );
/// let err = CallResult::from_error(&ToolError::not_found("no order ORD-9"));
/// assert_eq!(err.to_json()["error"]["kind"], "not_found");
///
/// match err.outcome() {
///     Outcome::Succeeded(data) => println!("done: {}", data.as_str()),
///     Outcome::Error(explanation) if explanation.kind == ErrorKind::NotFound => {
///         assert_eq!(explanation.what, "no order ORD-9");
///     }
///     other => panic!("unexpected {other:?}"),
/// }
/// assert_eq!(err.error_kind(), Some(ErrorKind::NotFound));
/// assert!(ok.is_succeeded() && ok.data().is_some());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The status.
    pub status: Status,
    /// Whether the outcome was stored earlier and returned without running the tool again.
    pub replayed: bool,
    /// The tool's result on success, as the JSON text it serialized to.
    pub data: Option<JsonText>,
    /// The explanation, for every status but a plain success. Boxed, like `steps` and
    /// `delivery`: a success is moved through the pipeline several times, and carries a
    /// pointer, not an explanation's room.
    pub error: Option<Box<Explanation>>,
    /// The steps of a multi-step write ([`Ctx::step`](crate::Ctx::step)), in the order the tool
    /// reached them. Present on `partial` (a step succeeded and another failed, none unknown),
    /// and on `outcome_unknown` answered by the call that ran the steps, when it reached at
    /// least one. Absent on every other result: a success, a failure, a replay of an unknown
    /// outcome.
    pub steps: Option<Box<Vec<StepReport>>>,
    /// How far the delivery of an outbox operation got. Present on `queued` (the call whose
    /// transaction committed, and a later call with the same arguments while the delivery is
    /// owed), and on `succeeded` answered to a later call once a worker delivered it. Absent
    /// on every other result, and on the `succeeded` of an outbox call that enqueued no event.
    pub delivery: Option<Box<DeliveryNote>>,
}

/// The delivery of an outbox operation, as the model reads it in a result's `delivery`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DeliveryNote {
    /// The operation's id: its idempotency key.
    pub operation: String,
    /// The event's status: `pending`, `leased`, `delivered`, `dead` or `unknown`.
    pub state: EventStatus,
    /// How many deliveries were tried.
    pub attempts: u32,
    /// The last delivery error, when one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<StepError>,
    /// The provider's answer, once delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonText>,
    /// What is true now, in words.
    pub what: String,
    /// What the model may do.
    pub next: String,
}

impl Serialize for CallResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("status", &self.status)?;
        if self.status != Status::Error {
            map.serialize_entry("replayed", &self.replayed)?;
        }
        if let Some(data) = &self.data {
            map.serialize_entry("data", data)?;
        }
        if let Some(steps) = &self.steps {
            map.serialize_entry("steps", steps)?;
        }
        if let Some(delivery) = &self.delivery {
            map.serialize_entry("delivery", delivery)?;
        }
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        map.end()
    }
}

/// A [`CallResult`] to match on: its status, with the part that status carries.
///
/// Every result the dispatcher makes carries data on a success and an explanation on every
/// other status; a result built by hand without that part is [`Outcome::Unexplained`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// The operation happened; its data (`replayed` says whether it ran now or earlier).
    Succeeded(&'a JsonText),
    /// Accepted and queued for delivery (an outbox tool): the tool's result; the provider has
    /// not acted yet.
    Queued(&'a JsonText),
    /// The operation definitely did not happen.
    Failed(&'a Explanation),
    /// The request was sent and nobody knows yet whether it was applied: not a failure.
    OutcomeUnknown(&'a Explanation),
    /// A duplicate of this call is running now.
    InProgress(&'a Explanation),
    /// The operation waits for a human decision.
    AwaitingApproval(&'a Explanation),
    /// A human rejected the operation.
    Rejected(&'a Explanation),
    /// Some steps succeeded and some did not.
    Partial(&'a Explanation),
    /// The call was not carried out; the explanation's `kind` says why.
    Error(&'a Explanation),
    /// A result of this status lacking the part the status needs (built by hand).
    Unexplained(Status),
}

impl CallResult {
    /// The status with the part it carries, to match on.
    pub fn outcome(&self) -> Outcome<'_> {
        let Some(explanation) = &self.error else {
            return match (self.status, &self.data) {
                (Status::Succeeded, Some(data)) => Outcome::Succeeded(data),
                (Status::Queued, Some(data)) => Outcome::Queued(data),
                (status, _) => Outcome::Unexplained(status),
            };
        };
        match self.status {
            Status::Succeeded => match &self.data {
                Some(data) => Outcome::Succeeded(data),
                None => Outcome::Error(explanation),
            },
            Status::Failed => Outcome::Failed(explanation),
            Status::OutcomeUnknown => Outcome::OutcomeUnknown(explanation),
            Status::InProgress => Outcome::InProgress(explanation),
            Status::AwaitingApproval => Outcome::AwaitingApproval(explanation),
            Status::Rejected => Outcome::Rejected(explanation),
            Status::Partial => Outcome::Partial(explanation),
            Status::Queued => match &self.data {
                Some(data) => Outcome::Queued(data),
                None => Outcome::Error(explanation),
            },
            Status::Error => Outcome::Error(explanation),
        }
    }

    /// Whether the operation happened (status `succeeded`), now or in an earlier call.
    pub fn is_succeeded(&self) -> bool {
        self.status == Status::Succeeded
    }

    /// The tool's output, on a success.
    pub fn data(&self) -> Option<&JsonText> {
        self.data.as_ref()
    }

    /// The explanation (kind, what, why, next), on every status but a plain success.
    pub fn explanation(&self) -> Option<&Explanation> {
        self.error.as_deref()
    }

    /// The explanation's kind, as the model reads it in `error.kind`.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        self.error.as_ref().map(|explanation| explanation.kind)
    }

    /// A success carrying `data`, the tool's output as JSON text.
    pub fn succeeded(data: JsonText) -> Self {
        CallResult {
            status: Status::Succeeded,
            replayed: false,
            data: Some(data),
            error: None,
            steps: None,
            delivery: None,
        }
    }

    /// The result the model sees for `err`: an `error` result, or `outcome_unknown` for a request
    /// whose outcome nobody knows.
    pub fn from_error(err: &ToolError) -> Self {
        let status = match err.kind() {
            ErrorKind::OutcomeUnknown => Status::OutcomeUnknown,
            ErrorKind::InProgress => Status::InProgress,
            ErrorKind::AwaitingApproval => Status::AwaitingApproval,
            ErrorKind::Rejected => Status::Rejected,
            _ => Status::Error,
        };
        debug_assert!(
            err.class() != ErrorClass::Abort,
            "aborts never reach the model"
        );
        CallResult {
            status,
            replayed: false,
            data: None,
            error: Some(Box::new(Explanation::from(err))),
            steps: None,
            delivery: None,
        }
    }

    /// The result object as a JSON value.
    pub fn to_json(&self) -> Value {
        tree_of(&self.to_json_string())
    }

    /// The result object as JSON text, the content a provider message carries.
    pub fn to_json_string(&self) -> String {
        let mut text = String::with_capacity(self.json_len_hint());
        self.write_json(&mut text)
            .expect("writing to a String cannot fail");
        text
    }

    /// Whether the result is data alone: no steps, no delivery.
    fn is_plain(&self) -> bool {
        self.steps.is_none() && self.delivery.is_none()
    }

    /// About how many bytes of JSON text the result object takes (exact for a success).
    pub(crate) fn json_len_hint(&self) -> usize {
        match &self.data {
            Some(data) if self.error.is_none() => data.len() + 48,
            _ => 160,
        }
    }

    /// Writes the result object as JSON text to `out`, the way
    /// [`CallResult::to_json_string`] returns it; a provider format can stream it into its own
    /// message without an intermediate string.
    pub fn write_json(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        match (&self.data, &self.error) {
            // A success, the hot path: the tool's text is copied in, not re-encoded.
            (Some(data), None) if self.is_plain() => {
                out.write_str("{\"status\":\"")?;
                out.write_str(self.status.as_str())?;
                out.write_str(if self.replayed {
                    "\",\"replayed\":true,\"data\":"
                } else {
                    "\",\"replayed\":false,\"data\":"
                })?;
                out.write_str(data.as_str())?;
                out.write_char('}')
            }
            _ => out.write_str(
                &serde_json::to_string(self).expect("a result object always serializes"),
            ),
        }
    }

    /// Appends the result object's text to `out`, escaped as the inside of a JSON string: the
    /// content of formats whose content is text. Of a success, only the tool's data is escaped
    /// as it is written; the rest is written escaped already.
    pub(crate) fn write_json_escaped(&self, out: &mut Vec<u8>) {
        match (&self.data, &self.error) {
            (Some(data), None) if self.is_plain() => {
                out.extend_from_slice(br#"{\"status\":\""#);
                // A status's wire name is lower-case letters and `_`: nothing to escape.
                out.extend_from_slice(self.status.as_str().as_bytes());
                out.extend_from_slice(if self.replayed {
                    br#"\",\"replayed\":true,\"data\":"#
                } else {
                    br#"\",\"replayed\":false,\"data\":"#
                });
                escape_into(out, data.as_str());
                out.push(b'}');
            }
            _ => escape_into(out, &self.to_json_string()),
        }
    }
}

/// The tree of a result object's JSON text, as [`CallResult::write_json`] writes it: parsed
/// once. (Serializing the result into a tree would read its data's text twice: once to check
/// it, once to build it.)
pub(crate) fn tree_of(text: &str) -> Value {
    serde_json::from_str(text).expect("a result object's text is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_status_name_needs_escaping() {
        // `write_json_escaped` writes the status's name as it is.
        for status in [
            Status::Succeeded,
            Status::Failed,
            Status::OutcomeUnknown,
            Status::InProgress,
            Status::AwaitingApproval,
            Status::Rejected,
            Status::Partial,
            Status::Queued,
            Status::Error,
        ] {
            let name = status.as_str();
            assert_eq!(serde_json::to_string(name).unwrap(), format!("\"{name}\""));
        }
    }

    #[test]
    fn the_escaped_text_is_the_text_escaped() {
        let err = ToolError::invalid_arguments("a \"quoted\" line\nand a tab\t");
        let mut results = vec![CallResult::from_error(&err)];
        for replayed in [false, true] {
            let mut result =
                CallResult::succeeded(JsonText::parse(r#"{"note":"a \"b\"\n"}"#).unwrap());
            result.replayed = replayed;
            results.push(result);
        }
        for result in results {
            let mut ours = Vec::new();
            result.write_json_escaped(&mut ours);
            let ours = String::from_utf8(ours).expect("escaped UTF-8 is UTF-8");
            let theirs = serde_json::to_string(&result.to_json_string()).unwrap();
            assert_eq!(format!("\"{ours}\""), theirs);
        }
    }

    #[test]
    fn error_results_carry_the_three_parts_and_no_replayed_flag() {
        let err = ToolError::invalid_arguments("amount must be greater than 0")
            .with_why("/amount is -5")
            .with_next("call issue_refund again with a positive amount");
        let text = CallResult::from_error(&err).to_json_string();
        assert_eq!(
            text,
            r#"{"status":"error","error":{"kind":"invalid_arguments","what":"amount must be greater than 0","why":"/amount is -5","next":"call issue_refund again with a positive amount"}}"#
        );
    }

    #[test]
    fn the_fast_text_of_a_success_equals_the_serde_one() {
        for replayed in [false, true] {
            let mut result =
                CallResult::succeeded(JsonText::of(&serde_json::json!({"a": [1, "b"]})).unwrap());
            result.replayed = replayed;
            assert_eq!(
                result.to_json_string(),
                serde_json::to_string(&result).unwrap()
            );
        }
    }

    #[test]
    fn the_tree_is_the_one_serde_builds() {
        let data = JsonText::of(&serde_json::json!({"n": 1.5, "big": u64::MAX, "s": "é\n"}));
        let mut replayed = CallResult::succeeded(data.unwrap());
        replayed.replayed = true;
        for result in [
            replayed,
            CallResult::from_error(&ToolError::outcome_unknown("the provider timed out")),
            CallResult::from_error(
                &ToolError::not_found("there is no order ORD-9").with_why("gone"),
            ),
        ] {
            assert_eq!(result.to_json(), serde_json::to_value(&result).unwrap());
        }
    }

    #[test]
    fn an_unknown_outcome_is_never_a_failure() {
        let result = CallResult::from_error(&ToolError::outcome_unknown("the provider timed out"));
        assert_eq!(result.status, Status::OutcomeUnknown);
        let json = result.to_json();
        assert_eq!(json["status"], "outcome_unknown");
        assert_eq!(json["replayed"], false);
        assert!(!json.to_string().contains("\"failed\""));
    }

    #[test]
    fn the_outcome_names_the_status_with_its_part() {
        let data = JsonText::parse(r#"{"refund_id":"re_1"}"#).unwrap();
        let ok = CallResult::succeeded(data.clone());
        assert_eq!(ok.outcome(), Outcome::Succeeded(&data));
        assert!(ok.is_succeeded());
        assert_eq!(ok.data(), Some(&data));
        assert_eq!((ok.explanation(), ok.error_kind()), (None, None));

        let cases = [
            (ToolError::not_found("no order"), Status::Error),
            (
                ToolError::outcome_unknown("timed out"),
                Status::OutcomeUnknown,
            ),
            (
                ToolError::new(ErrorKind::InProgress, "running"),
                Status::InProgress,
            ),
        ];
        for (err, status) in cases {
            let result = CallResult::from_error(&err);
            let explanation = result.explanation().expect("an explanation");
            let expected = match status {
                Status::Error => Outcome::Error(explanation),
                Status::OutcomeUnknown => Outcome::OutcomeUnknown(explanation),
                _ => Outcome::InProgress(explanation),
            };
            assert_eq!(result.outcome(), expected, "{err:?}");
            assert_eq!(result.error_kind(), Some(err.kind()));
            assert!(!result.is_succeeded());
            assert_eq!(result.data(), None);
        }

        // Statuses the dispatcher does not make yet, built by hand, still match by status.
        let mut rejected = CallResult::from_error(&ToolError::refused("no"));
        rejected.status = Status::Rejected;
        assert!(matches!(rejected.outcome(), Outcome::Rejected(e) if e.kind == ErrorKind::Refused));
        rejected.error = None;
        assert_eq!(rejected.outcome(), Outcome::Unexplained(Status::Rejected));
    }

    /// A store or provider that could not be reached reads `unavailable`, typed and as text,
    /// with the advice to try again.
    #[test]
    fn an_unavailable_error_reads_as_unavailable() {
        let result = CallResult::from_error(&ToolError::unavailable("the provider answered 503"));
        assert_eq!(result.error_kind(), Some(ErrorKind::Unavailable));
        assert_eq!(result.to_json()["error"]["kind"], "unavailable");
        assert_eq!(
            result.to_json()["error"]["next"],
            "try again in a moment; if it keeps failing, tell the user the service is unavailable"
        );
    }
}
