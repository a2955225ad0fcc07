//! The lines of a refund desk script (`examples/scenarios/README.md`): JSON Lines, one object a line
//! with exactly one key.
//!
//! A script is read as bytes and taken apart line by line ([`lines`]), so that one bad line (not
//! UTF-8, not JSON, a key given twice) is that line's error and the lines after it still play. A
//! turn's message is kept as the text it was written as, for the provider format to read
//! ([`Line::Turn`]); every other line is read here, each object's keys checked for duplicates.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolgate::store::Verdict;
use toolgate::{AuthContext, RunLimits, tool::Delivery};

/// The UTF-8 byte-order mark, which some editors put at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The lines of `script` with their numbers (from 1), each as text or what is wrong with it;
/// blank lines are left out, and a byte-order mark at the very start is skipped. A line ends at
/// `\n`, with or without `\r` before it.
#[cfg(test)]
pub(crate) fn lines(script: &[u8]) -> impl Iterator<Item = (usize, Result<&str, String>)> {
    script
        .split(|&byte| byte == b'\n')
        .enumerate()
        .filter_map(|(index, line)| decode(index + 1, line).map(|text| (index + 1, text)))
}

/// Line `number` (from 1) of a script, without its `\n`: its text, what is wrong with it, or
/// `None` for a blank line. A byte-order mark at the start of line 1 is skipped, and so is a
/// `\r` at the end of any line.
pub(crate) fn decode(number: usize, line: &[u8]) -> Option<Result<&str, String>> {
    let line = match number {
        1 => line.strip_prefix(BOM).unwrap_or(line),
        _ => line,
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match std::str::from_utf8(line) {
        Ok(text) if text.trim().is_empty() => None,
        Ok(text) => Some(Ok(text)),
        Err(err) => Some(Err(format!(
            "not UTF-8: the byte at column {} cannot start or continue a character",
            err.valid_up_to() + 1
        ))),
    }
}

/// `text` cut after `limit` characters with `…`: what an error quotes of the script.
pub(crate) fn shortened(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// One line of a script.
#[derive(Debug)]
pub(crate) enum Line<'a> {
    /// The authenticated context for the turns that follow.
    Session(AuthContext),
    /// A new agent run with this id, and its limits when the line gave any.
    Run(String, Option<RunLimits>),
    /// One model turn: the assistant message, as written in the script (a JSON object).
    Turn(Dialect, &'a str),
    /// The next requests of a provider operation misbehave: the `fault` object, for the provider.
    Fault(Value),
    /// Run the reconciler once.
    Reconcile,
    /// Drop the dispatcher and reopen the store.
    Restart,
    /// `approve` or `reject`: decide every operation waiting for approval, as the approver.
    Decide {
        /// Approve or reject.
        verdict: Verdict,
        /// Who decides: their tenant, user and permissions.
        approver: AuthContext,
        /// Why.
        reason: String,
    },
    /// Run the application's runner of approved operations once.
    RunApproved,
    /// `issue_refund` is delivered this way from now on.
    Delivery(Delivery),
    /// The outbox worker delivers every event due.
    Deliver,
    /// A refund made at the provider directly, outside the agent (a person in the provider's
    /// dashboard), under its own idempotency key.
    ProviderRefund {
        /// The order.
        order_id: String,
        /// The amount, in cents.
        amount_cents: u64,
        /// The provider's idempotency key of this refund.
        key: String,
    },
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

/// The object of a `provider_refund` line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderRefundLine {
    order_id: String,
    amount_cents: u64,
    key: String,
}

/// The object of an `approve` or `reject` line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideLine {
    approver: SessionLine,
    reason: String,
}

impl SessionLine {
    fn auth(self) -> AuthContext {
        AuthContext::new(self.tenant, self.user).with_permissions(self.permissions)
    }
}

/// The object of a `run` line that gives limits; a limit left out keeps
/// [`RunLimits::DEFAULT`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunLine {
    id: String,
    max_steps: Option<u32>,
    max_tool_calls: Option<u32>,
    retry_budget: Option<u32>,
}

impl RunLine {
    /// The run's id and limits, or what is wrong with them.
    fn read(self) -> Result<(String, RunLimits), String> {
        if self.id.is_empty() {
            return Err("a run's `id` is a non-empty string".to_owned());
        }
        let default = RunLimits::DEFAULT;
        let limits = RunLimits {
            max_steps: self.max_steps.or(default.max_steps),
            max_tool_calls: self.max_tool_calls.or(default.max_tool_calls),
            retry_budget: self.retry_budget.or(default.retry_budget),
        };
        Ok((self.id, limits))
    }
}

const KEYS: &str = "session, run, openai, anthropic, fault, reconcile, restart, approve, reject, \
     run_approved, delivery, deliver, provider_refund";

/// `direct` or `outbox`, as the `delivery` line and the `--delivery` flag write it.
pub(crate) fn delivery(name: &str) -> Result<Delivery, String> {
    match name {
        "direct" => Ok(Delivery::Direct),
        "outbox" => Ok(Delivery::Outbox),
        other => Err(format!(
            "`{}` is not a delivery: write \"direct\" or \"outbox\"",
            shortened(other, 40)
        )),
    }
}

impl<'a> Line<'a> {
    /// The line `text`, or what is wrong with it.
    pub(crate) fn parse(text: &'a str) -> Result<Line<'a>, String> {
        if !text.trim_start().starts_with('{') {
            return Err("not a JSON object".to_owned());
        }
        let OnlyEntry(key, raw) =
            serde_json::from_str(text).map_err(|err| match err.classify() {
                serde_json::error::Category::Data => err.to_string(),
                _ => format!("not a JSON object: {err}"),
            })?;
        let key = key.as_str();
        let value = || checked(raw);
        let object = |value: Value| match value {
            Value::Object(_) => Ok(value),
            other => Err(format!(
                "`{key}` takes an object, not {}",
                shortened(&other.to_string(), 80)
            )),
        };
        let turn = |dialect: Dialect| match raw.get().starts_with('{') {
            true => Ok(Line::Turn(dialect, raw.get())),
            false => Err(format!(
                "`{key}` takes an object, not {}",
                shortened(raw.get(), 80)
            )),
        };
        Ok(match key {
            "session" => {
                let session: SessionLine = serde_json::from_value(value()?)
                    .map_err(|err| format!("a bad session: {err}"))?;
                Line::Session(session.auth())
            }
            "run" => match value()? {
                Value::String(run) if !run.is_empty() => Line::Run(run, None),
                run @ Value::Object(_) => {
                    let (id, limits) = serde_json::from_value::<RunLine>(run)
                        .map_err(|err| format!("a bad run: {err}"))?
                        .read()?;
                    Line::Run(id, Some(limits))
                }
                other => {
                    return Err(format!(
                        "`run` takes a non-empty string or an object with its `id` and limits, \
                         not {}",
                        shortened(&other.to_string(), 80)
                    ));
                }
            },
            "openai" => turn(Dialect::OpenAi)?,
            "anthropic" => turn(Dialect::Anthropic)?,
            "fault" => Line::Fault(object(value()?)?),
            "reconcile" => {
                object(value()?)?;
                Line::Reconcile
            }
            "restart" => {
                object(value()?)?;
                Line::Restart
            }
            "approve" | "reject" => {
                let line: DecideLine = serde_json::from_value(value()?)
                    .map_err(|err| format!("a bad `{key}`: {err}"))?;
                Line::Decide {
                    verdict: if key == "approve" {
                        Verdict::Approve
                    } else {
                        Verdict::Reject
                    },
                    approver: line.approver.auth(),
                    reason: line.reason,
                }
            }
            "run_approved" => {
                object(value()?)?;
                Line::RunApproved
            }
            "delivery" => match value()? {
                Value::String(name) => Line::Delivery(delivery(&name)?),
                other => {
                    return Err(format!(
                        "`delivery` takes \"direct\" or \"outbox\", not {}",
                        shortened(&other.to_string(), 80)
                    ));
                }
            },
            "deliver" => {
                object(value()?)?;
                Line::Deliver
            }
            "provider_refund" => {
                let line: ProviderRefundLine = serde_json::from_value(value()?)
                    .map_err(|err| format!("a bad `provider_refund`: {err}"))?;
                Line::ProviderRefund {
                    order_id: line.order_id,
                    amount_cents: line.amount_cents,
                    key: line.key,
                }
            }
            other => {
                return Err(format!(
                    "unknown line `{}`: use one of {KEYS}",
                    shortened(other, 40)
                ));
            }
        })
    }
}

/// A line's one key and its value, as written; an error for a second key.
struct OnlyEntry<'a>(String, &'a RawValue);

impl<'de> Deserialize<'de> for OnlyEntry<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OnlyEntryVisitor;

        impl<'de> Visitor<'de> for OnlyEntryVisitor {
            type Value = OnlyEntry<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let one_key =
                    || de::Error::custom(format!("a line has exactly one key, one of {KEYS}"));
                let key: String = map.next_key()?.ok_or_else(one_key)?;
                let value = map.next_value()?;
                match map.next_key::<String>()? {
                    None => Ok(OnlyEntry(key, value)),
                    Some(again) if again == key => Err(twice(&key)),
                    Some(_) => Err(one_key()),
                }
            }
        }

        deserializer.deserialize_map(OnlyEntryVisitor)
    }
}

/// `raw` read as a JSON value whose objects each give a key once, or what is wrong with it.
fn checked(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str::<Checked>(raw.get())
        .map(|Checked(value)| value)
        .map_err(|err| err.to_string())
}

fn twice<E: de::Error>(key: &str) -> E {
    E::custom(format!("the key `{}` is given twice", shortened(key, 40)))
}

/// A JSON value read with every object's keys checked: a key given twice is an error naming it,
/// where `serde_json::Value` keeps the last silently.
struct Checked(Value);

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor).map(Checked)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Checked(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(twice(&key));
            }
            let Checked(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
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
        assert!(matches!(Line::parse(r#"{"run": "r1"}"#), Ok(Line::Run(run, None)) if run == "r1"));
        assert!(matches!(
            Line::parse(r#"{"anthropic": {"role": "assistant", "content": []}}"#),
            Ok(Line::Turn(Dialect::Anthropic, _))
        ));
        assert!(matches!(
            Line::parse(r#"{"reconcile": {}}"#),
            Ok(Line::Reconcile)
        ));
        assert!(matches!(
            Line::parse(r#"{"provider_refund": {"order_id": "ORD-1002", "amount_cents": 10000, "key": "d-1"}}"#),
            Ok(Line::ProviderRefund { order_id, amount_cents: 10000, key }) if order_id == "ORD-1002" && key == "d-1"
        ));
        assert!(
            Line::parse(
                r#"{"provider_refund": {"order_id": "ORD-1002", "amount_cents": -1, "key": "d"}}"#
            )
            .unwrap_err()
            .starts_with("a bad `provider_refund`")
        );
        assert!(matches!(
            Line::parse(r#"{"restart": {}}"#),
            Ok(Line::Restart)
        ));
        let approve = r#"{"approve": {"approver": {"tenant": "acme", "user": "manager", "permissions": ["refund:approve"]}, "reason": "ok"}}"#;
        match Line::parse(approve).unwrap() {
            Line::Decide {
                verdict: Verdict::Approve,
                approver,
                reason,
            } => {
                assert_eq!(approver.user(), "manager");
                assert!(approver.has_permission("refund:approve"));
                assert_eq!(reason, "ok");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Line::parse(r#"{"run_approved": {}}"#),
            Ok(Line::RunApproved)
        ));
        assert!(matches!(
            Line::parse(r#"{"delivery": "outbox"}"#),
            Ok(Line::Delivery(Delivery::Outbox))
        ));
        assert!(matches!(
            Line::parse(r#"{"delivery": "direct"}"#),
            Ok(Line::Delivery(Delivery::Direct))
        ));
        assert!(matches!(
            Line::parse(r#"{"deliver": {}}"#),
            Ok(Line::Deliver)
        ));
        assert!(
            Line::parse(r#"{"reject": {"reason": "no"}}"#)
                .unwrap_err()
                .contains("missing field `approver`")
        );
    }

    #[test]
    fn a_run_line_gives_limits_and_the_others_keep_their_defaults() {
        let line = r#"{"run": {"id": "r2", "max_steps": 8, "retry_budget": 6}}"#;
        match Line::parse(line).unwrap() {
            Line::Run(id, Some(limits)) => {
                assert_eq!(id, "r2");
                assert_eq!(
                    limits,
                    RunLimits {
                        max_steps: Some(8),
                        max_tool_calls: RunLimits::DEFAULT.max_tool_calls,
                        retry_budget: Some(6),
                    }
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Line::parse(r#"{"run": {"id": "r3"}}"#),
            Ok(Line::Run(_, Some(RunLimits::DEFAULT)))
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
            (r#"{"run": {"max_steps": 2}}"#, "missing field `id`"),
            (r#"{"run": {"id": ""}}"#, "non-empty string"),
            (
                r#"{"run": {"id": "r", "max_turns": 2}}"#,
                "unknown field `max_turns`",
            ),
            (
                r#"{"run": {"id": "r", "max_steps": "2"}}"#,
                "invalid type: string",
            ),
            (
                r#"{"run": {"id": "r", "retry_budget": -1}}"#,
                "invalid value",
            ),
            (
                r#"{"run": {"id": "r", "max_tool_calls": 5000000000}}"#,
                "invalid value",
            ),
            (r#"{"openai": "hi"}"#, "takes an object"),
            (r#"{"delivery": "later"}"#, "`later` is not a delivery"),
            (
                r#"{"delivery": {}}"#,
                "`delivery` takes \"direct\" or \"outbox\"",
            ),
            (r#"{"deliver": 1}"#, "`deliver` takes an object"),
            (r#"{"session": {"tenant": "acme"}}"#, "missing field `user`"),
        ] {
            let err = Line::parse(line).unwrap_err();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }

    fn texts(script: &[u8]) -> Vec<(usize, Result<&str, String>)> {
        lines(script).collect()
    }

    #[test]
    fn a_script_is_read_line_by_line_as_bytes() {
        let script =
            b"\xEF\xBB\xBF{\"run\": \"r1\"}\r\n\n  \n{\"run\": \"\xFF\"}\n{\"reconcile\": {}}";
        let lines = texts(script);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            lines[0],
            (1, Ok(r#"{"run": "r1"}"#)),
            "the BOM and the \\r are gone"
        );
        let (number, bad) = &lines[1];
        assert_eq!(*number, 4);
        assert_eq!(
            bad.as_deref().unwrap_err(),
            "not UTF-8: the byte at column 10 cannot start or continue a character"
        );
        assert_eq!(
            lines[2],
            (5, Ok(r#"{"reconcile": {}}"#)),
            "the script goes on"
        );
        assert!(
            matches!(Line::parse(lines[0].1.as_ref().unwrap()), Ok(Line::Run(run, None)) if run == "r1")
        );
        // A mark anywhere else is no mark: that line is an error of its own.
        let later = texts(b"{}\n\xEF\xBB\xBF{}");
        assert_eq!(later[1], (2, Ok("\u{feff}{}")));
        assert_eq!(Line::parse("\u{feff}{}").unwrap_err(), "not a JSON object");
    }

    #[test]
    fn a_key_given_twice_is_an_error_naming_it() {
        for (line, needle) in [
            (
                r#"{"run": "a", "run": "b"}"#,
                "the key `run` is given twice",
            ),
            (
                r#"{"fault": {"operation": "refund", "kind": "slow", "ms": 1, "ms": 99}}"#,
                "the key `ms` is given twice",
            ),
            (
                r#"{"session": {"tenant": "acme", "user": "a", "user": "root"}}"#,
                "the key `user` is given twice",
            ),
            (
                r#"{"restart": {"x": [{"y": 1, "y": 2}]}}"#,
                "the key `y` is given twice",
            ),
        ] {
            let err = Line::parse(line).unwrap_err();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }

    #[test]
    fn a_turn_is_kept_as_written_for_the_provider_format() {
        let line = r#"{"openai": {"tool_calls": [], "content": "a\u00e9"}}"#;
        match Line::parse(line).unwrap() {
            Line::Turn(Dialect::OpenAi, text) => {
                assert_eq!(text, r#"{"tool_calls": [], "content": "a\u00e9"}"#);
            }
            other => panic!("{other:?}"),
        }
        // Nesting deeper than a JSON tree may go is the format's to refuse, not the line's.
        let deep = format!(
            r#"{{"anthropic": {{"content": {}1{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(
            Line::parse(&deep),
            Ok(Line::Turn(Dialect::Anthropic, _))
        ));
        let deep_fault = format!(
            r#"{{"fault": {}1{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(
            Line::parse(&deep_fault)
                .unwrap_err()
                .contains("recursion limit")
        );
    }

    #[test]
    fn what_an_error_quotes_of_a_line_is_short() {
        let huge = "x".repeat(1_000_000);
        for line in [
            format!(r#"{{"{huge}": 1}}"#),
            format!(r#"{{"run": ["{huge}"]}}"#),
            format!(r#"{{"openai": "{huge}"}}"#),
            format!(r#"{{"run": "a", "{huge}": 1, "{huge}": 2}}"#),
        ] {
            let err = Line::parse(&line).unwrap_err();
            assert!(err.len() < 400, "{}", shortened(&err, 400));
        }
    }
}
