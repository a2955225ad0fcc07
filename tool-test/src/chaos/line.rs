//! [`StoryLine`]: one line of a [`Story`](super::Story), read from and written as one JSON
//! object with one key.

use std::fmt;
use std::time::Duration;

use http::Method;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use toolgate_core::RunLimits;
use toolgate_core::provider::{Anthropic, Gemini, OpenAiChat, OpenAiResponses, WireFormat};
use toolgate_core::store::Verdict;

use super::{Fault, Route};

/// One line of a [`Story`](super::Story): a change of who calls, a model turn, a fault planned
/// for the provider, or something the application does between turns.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StoryLine {
    /// `{"session": {"tenant", "user", "permissions"}}`: who calls in the turns that follow.
    Session {
        /// The tenant.
        tenant: String,
        /// The user.
        user: String,
        /// The permissions the user holds.
        permissions: Vec<String>,
    },
    /// `{"run": "id"}`, or `{"run": {"id", "max_steps", "max_tool_calls", "retry_budget"}}`: the
    /// turns that follow belong to a new agent run with this id, under these limits (a limit
    /// left out keeps `RunLimits::DEFAULT`'s; no limits, the dispatcher's own).
    Run {
        /// The run's id.
        id: String,
        /// Its limits, when the line gives them.
        limits: Option<RunLimits>,
    },
    /// `{"openai": message}` and the other formats: one model turn, the assistant message as
    /// the provider sends it, kept as its JSON text.
    Turn {
        /// The provider format the message is in.
        format: TurnFormat,
        /// The message's JSON text.
        message: String,
    },
    /// `{"fault": {"route": "POST /refunds", "kind": "drop_after_apply", "times": 1}}`: the
    /// next `times` requests of `route` take `fault` ([`FaultPlan::next`](super::FaultPlan::next)).
    Fault {
        /// Which requests.
        route: Route,
        /// What they meet.
        fault: Fault,
        /// How many of them.
        times: u64,
    },
    /// `{"restart": {}}`: the current process's dispatcher is dropped and its store opened
    /// again, as a restarted process would.
    Restart,
    /// `{"process": "b"}`: the lines that follow run in the process of this name, with a
    /// dispatcher of its own on the same store; the story starts in process `a`.
    Process(String),
    /// `{"reconcile": {}}`: one pass of the reconciler.
    Reconcile,
    /// `{"approve": {"approver", "permissions", "reason"}}` or `{"reject": …}`: every approval
    /// pending in the session's tenant is decided by this operator.
    Decide {
        /// Approve or reject.
        verdict: Verdict,
        /// The operator's subject.
        approver: String,
        /// The operator's permissions.
        permissions: Vec<String>,
        /// Why.
        reason: String,
    },
    /// `{"run_approved": {}}`: one pass of the runner of approved operations.
    RunApproved,
    /// `{"deliver": {}}`: the stage's outbox worker delivers every event due, until a pass
    /// leases nothing.
    Deliver,
    /// `{"act": {"name": "refund_by_hand", "args": {…}}}`: the application's act of this name
    /// ([`Stage::with_act`](super::Stage::with_act)), something done between turns that no
    /// other line does (a refund made at the provider by hand, a setting changed), given
    /// `args` (`{}` when left out).
    Act {
        /// The act's name.
        name: String,
        /// What it is given.
        args: Value,
    },
}

/// The provider format of a model turn, and the key of its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TurnFormat {
    /// `openai`: an OpenAI Chat Completions assistant message with `tool_calls`.
    OpenAi,
    /// `openai_responses`: the `output` items of an OpenAI Responses answer.
    OpenAiResponses,
    /// `anthropic`: an Anthropic Messages assistant message with `tool_use` blocks.
    Anthropic,
    /// `gemini`: a Gemini model content with `functionCall` parts.
    Gemini,
}

impl TurnFormat {
    /// Every format.
    pub const ALL: [TurnFormat; 4] = [
        TurnFormat::OpenAi,
        TurnFormat::OpenAiResponses,
        TurnFormat::Anthropic,
        TurnFormat::Gemini,
    ];

    /// The key of the format's line: `openai`, `openai_responses`, `anthropic`, `gemini`.
    pub const fn key(self) -> &'static str {
        match self {
            TurnFormat::OpenAi => "openai",
            TurnFormat::OpenAiResponses => "openai_responses",
            TurnFormat::Anthropic => "anthropic",
            TurnFormat::Gemini => "gemini",
        }
    }

    /// The format that reads the turn and writes its answer.
    pub fn wire(self) -> &'static dyn WireFormat {
        match self {
            TurnFormat::OpenAi => &OpenAiChat { strict: false },
            TurnFormat::OpenAiResponses => &OpenAiResponses { strict: false },
            TurnFormat::Anthropic => &Anthropic { strict: false },
            TurnFormat::Gemini => &Gemini,
        }
    }

    fn by_key(key: &str) -> Option<TurnFormat> {
        TurnFormat::ALL
            .into_iter()
            .find(|format| format.key() == key)
    }
}

/// The keys a line may have.
const KEYS: &str = "session, run, openai, openai_responses, anthropic, gemini, fault, restart, \
                    process, reconcile, approve, reject, run_approved, deliver, act";

/// The object of a `session` line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionFields {
    tenant: String,
    user: String,
    #[serde(default)]
    permissions: Vec<String>,
}

/// The object of a `fault` line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultFields {
    route: String,
    kind: String,
    #[serde(default = "one")]
    times: u64,
    retry_after_ms: Option<u64>,
    ms: Option<u64>,
}

fn one() -> u64 {
    1
}

/// The object of an `approve` or `reject` line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideFields {
    approver: String,
    #[serde(default)]
    permissions: Vec<String>,
    reason: String,
}

/// The object of an `act` line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActFields {
    name: String,
    #[serde(default = "no_args")]
    args: Value,
}

fn no_args() -> Value {
    json!({})
}

/// The object of `restart`, `reconcile`, `run_approved` and `deliver`: empty.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

impl StoryLine {
    /// The line `text`, or what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<StoryLine, String> {
        let OnlyEntry(key, raw) =
            serde_json::from_str(text).map_err(|err| match err.classify() {
                serde_json::error::Category::Data => err.to_string(),
                _ => format!("not a JSON object: {err}"),
            })?;
        let fields = |what: &str| {
            let key = key.clone();
            let what = what.to_owned();
            move |err: serde_json::Error| format!("a bad `{key}` ({what}): {err}")
        };
        if let Some(format) = TurnFormat::by_key(&key) {
            let message = raw.get().to_owned();
            // Read now, so that a turn the format cannot read is this line's error.
            format
                .wire()
                .parse_calls_text(&message)
                .map_err(|err| err.to_string())?;
            return Ok(StoryLine::Turn { format, message });
        }
        Ok(match key.as_str() {
            "session" => {
                let session: SessionFields =
                    serde_json::from_str(raw.get()).map_err(fields("tenant, user, permissions"))?;
                StoryLine::Session {
                    tenant: session.tenant,
                    user: session.user,
                    permissions: session.permissions,
                }
            }
            "run" => run(raw, fields("id, max_steps, max_tool_calls, retry_budget"))?,
            "process" => StoryLine::Process(name(&key, raw)?),
            "fault" => {
                let fault: FaultFields = serde_json::from_str(raw.get())
                    .map_err(fields("route, kind, times, retry_after_ms, ms"))?;
                fault.read()?
            }
            "restart" | "reconcile" | "run_approved" | "deliver" => {
                serde_json::from_str::<Empty>(raw.get()).map_err(fields("an empty object"))?;
                match key.as_str() {
                    "restart" => StoryLine::Restart,
                    "reconcile" => StoryLine::Reconcile,
                    "deliver" => StoryLine::Deliver,
                    _ => StoryLine::RunApproved,
                }
            }
            "approve" | "reject" => {
                let decide: DecideFields = serde_json::from_str(raw.get())
                    .map_err(fields("approver, permissions, reason"))?;
                StoryLine::Decide {
                    verdict: match key.as_str() {
                        "approve" => Verdict::Approve,
                        _ => Verdict::Reject,
                    },
                    approver: decide.approver,
                    permissions: decide.permissions,
                    reason: decide.reason,
                }
            }
            "act" => {
                let act: ActFields =
                    serde_json::from_str(raw.get()).map_err(fields("name, args"))?;
                if act.name.is_empty() {
                    return Err("an act's `name` is a non-empty string".to_owned());
                }
                StoryLine::Act {
                    name: act.name,
                    args: act.args,
                }
            }
            other => return Err(format!("unknown line `{other}`: use one of {KEYS}")),
        })
    }

    /// The line as one JSON object with one key, without a line break.
    pub fn to_json(&self) -> String {
        let (key, value) = match self {
            StoryLine::Session {
                tenant,
                user,
                permissions,
            } => (
                "session",
                json!({"tenant": tenant, "user": user, "permissions": permissions}),
            ),
            StoryLine::Run { id, limits: None } => ("run", json!(id)),
            StoryLine::Run {
                id,
                limits: Some(limits),
            } => (
                "run",
                json!({
                    "id": id,
                    "max_steps": limits.max_steps,
                    "max_tool_calls": limits.max_tool_calls,
                    "retry_budget": limits.retry_budget,
                }),
            ),
            StoryLine::Turn { format, message } => {
                let key = Value::from(format.key()).to_string();
                return format!("{{{key}:{message}}}");
            }
            StoryLine::Fault {
                route,
                fault,
                times,
            } => ("fault", fault_json(route, *fault, *times)),
            StoryLine::Restart => ("restart", json!({})),
            StoryLine::Process(name) => ("process", json!(name)),
            StoryLine::Reconcile => ("reconcile", json!({})),
            StoryLine::Decide {
                verdict,
                approver,
                permissions,
                reason,
            } => (
                verdict.as_str(),
                json!({"approver": approver, "permissions": permissions, "reason": reason}),
            ),
            StoryLine::RunApproved => ("run_approved", json!({})),
            StoryLine::Deliver => ("deliver", json!({})),
            StoryLine::Act { name, args } => ("act", json!({"name": name, "args": args})),
        };
        json!({ key: value }).to_string()
    }
}

impl fmt::Display for StoryLine {
    /// The line as [`StoryLine::to_json`] writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// A `run` or `process` name: a non-empty string.
/// The fields of a `run` line that gives limits: a limit left out is `RunLimits::DEFAULT`'s, a
/// limit `null` is none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFields {
    id: String,
    #[serde(default = "left_out")]
    max_steps: Limit,
    #[serde(default = "left_out")]
    max_tool_calls: Limit,
    #[serde(default = "left_out")]
    retry_budget: Limit,
}

/// One limit of a `run` line as written: a number, `null` (no limit), or left out (`None`).
struct Limit(Option<Option<u32>>);

impl<'de> Deserialize<'de> for Limit {
    /// Given, it is a number or `null`: `Some`. (Left out, the field's default makes it `None`.)
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Limit, D::Error> {
        Option::<u32>::deserialize(deserializer).map(|limit| Limit(Some(limit)))
    }
}

fn left_out() -> Limit {
    Limit(None)
}

impl Limit {
    /// The limit, `default` when it was left out.
    fn or(self, default: Option<u32>) -> Option<u32> {
        self.0.unwrap_or(default)
    }
}

/// A `run` line: its id alone, or an object with the id and the run's limits.
fn run(raw: &RawValue, bad: impl FnOnce(serde_json::Error) -> String) -> Result<StoryLine, String> {
    if !raw.get().trim_start().starts_with('{') {
        let id = name("run", raw)?;
        return Ok(StoryLine::Run { id, limits: None });
    }
    let fields: RunFields = serde_json::from_str(raw.get()).map_err(bad)?;
    if fields.id.is_empty() {
        return Err("a run's `id` is a non-empty string".to_owned());
    }
    let default = RunLimits::DEFAULT;
    let limits = RunLimits {
        max_steps: fields.max_steps.or(default.max_steps),
        max_tool_calls: fields.max_tool_calls.or(default.max_tool_calls),
        retry_budget: fields.retry_budget.or(default.retry_budget),
    };
    Ok(StoryLine::Run {
        id: fields.id,
        limits: Some(limits),
    })
}

fn name(key: &str, raw: &RawValue) -> Result<String, String> {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::String(name)) if !name.is_empty() => Ok(name),
        _ => Err(format!("`{key}` takes a non-empty string")),
    }
}

impl FaultFields {
    fn read(self) -> Result<StoryLine, String> {
        let route = route(&self.route)?;
        let millis = |field: Option<u64>, name: &str| {
            field
                .map(Duration::from_millis)
                .ok_or_else(|| format!("a `{}` fault needs `{name}`", self.kind))
        };
        let fault = match self.kind.as_str() {
            "unavailable" => Fault::Unavailable,
            "rate_limited" => Fault::RateLimited {
                retry_after: millis(self.retry_after_ms, "retry_after_ms")?,
            },
            "drop_after_apply" => Fault::DropAfterApply,
            "reset_after_apply" => Fault::ResetAfterApply,
            "delay" => Fault::Delay(millis(self.ms, "ms")?),
            other => {
                return Err(format!(
                    "unknown fault kind `{other}`: use one of unavailable, rate_limited, \
                     drop_after_apply, reset_after_apply, delay"
                ));
            }
        };
        let stray = match fault {
            Fault::RateLimited { .. } => self.ms.map(|_| "ms"),
            Fault::Delay(_) => self.retry_after_ms.map(|_| "retry_after_ms"),
            _ => self
                .ms
                .map(|_| "ms")
                .or(self.retry_after_ms.map(|_| "retry_after_ms")),
        };
        if let Some(stray) = stray {
            return Err(format!("a `{}` fault takes no `{stray}`", self.kind));
        }
        Ok(StoryLine::Fault {
            route,
            fault,
            times: self.times,
        })
    }
}

/// `POST /refunds`, or `any /refunds` for every method: a route as [`Route`] writes itself.
fn route(text: &str) -> Result<Route, String> {
    let bad = || format!("`{text}` is not a route: write a method and a path, as `POST /refunds`");
    let (method, prefix) = text.split_once(' ').ok_or_else(bad)?;
    if !prefix.starts_with('/') {
        return Err(bad());
    }
    if method == "any" {
        return Ok(Route::any(prefix));
    }
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| bad())?;
    Ok(Route::new(method, prefix))
}

fn fault_json(route: &Route, fault: Fault, times: u64) -> Value {
    let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let mut object = json!({"route": route.to_string(), "kind": "", "times": times});
    let kind = match fault {
        Fault::Unavailable => "unavailable",
        Fault::RateLimited { retry_after } => {
            object["retry_after_ms"] = json!(millis(retry_after));
            "rate_limited"
        }
        Fault::DropAfterApply => "drop_after_apply",
        Fault::ResetAfterApply => "reset_after_apply",
        Fault::Delay(delay) => {
            object["ms"] = json!(millis(delay));
            "delay"
        }
    };
    object["kind"] = json!(kind);
    object
}

/// A line's one key and its value, as written; an error for a second key.
struct OnlyEntry<'a>(String, &'a RawValue);

impl<'de> Deserialize<'de> for OnlyEntry<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OnlyEntryVisitor;

        impl<'de> Visitor<'de> for OnlyEntryVisitor {
            type Value = OnlyEntry<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object with one key")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let one_key =
                    || de::Error::custom(format!("a line has exactly one key, one of {KEYS}"));
                let key: String = map.next_key()?.ok_or_else(one_key)?;
                let value = map.next_value()?;
                match map.next_key::<String>()? {
                    None => Ok(OnlyEntry(key, value)),
                    Some(_) => Err(one_key()),
                }
            }
        }

        deserializer.deserialize_map(OnlyEntryVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_reads_and_writes_itself_back() {
        let lines = [
            r#"{"session":{"tenant":"acme","user":"agent","permissions":["refund:create"]}}"#,
            r#"{"run":"r1"}"#,
            r#"{"run":{"id":"r2","max_steps":8,"max_tool_calls":1,"retry_budget":null}}"#,
            r#"{"openai":{"role": "assistant", "tool_calls": []}}"#,
            r#"{"anthropic":{"role":"assistant","content":[]}}"#,
            r#"{"gemini":{"role":"model","parts":[]}}"#,
            r#"{"openai_responses":[]}"#,
            r#"{"fault":{"route":"POST /refunds","kind":"drop_after_apply","times":1}}"#,
            r#"{"fault":{"route":"any /","kind":"rate_limited","times":2,"retry_after_ms":1500}}"#,
            r#"{"fault":{"route":"GET /refunds","kind":"delay","times":1,"ms":20}}"#,
            r#"{"fault":{"route":"POST /refunds","kind":"reset_after_apply","times":3}}"#,
            r#"{"fault":{"route":"POST /refunds","kind":"unavailable","times":1}}"#,
            r#"{"restart":{}}"#,
            r#"{"process":"b"}"#,
            r#"{"reconcile":{}}"#,
            r#"{"approve":{"approver":"manager","permissions":["refund:approve"],"reason":"ok"}}"#,
            r#"{"reject":{"approver":"manager","permissions":[],"reason":"no"}}"#,
            r#"{"run_approved":{}}"#,
            r#"{"deliver":{}}"#,
        ];
        for text in lines {
            let line = StoryLine::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(line.to_json(), text, "{line:?}");
        }
    }

    #[test]
    fn a_run_line_keeps_the_default_for_a_limit_left_out() {
        let line = StoryLine::parse(r#"{"run": {"id": "r2", "max_tool_calls": 1}}"#).unwrap();
        let StoryLine::Run {
            id,
            limits: Some(limits),
        } = line
        else {
            panic!("{line:?}");
        };
        assert_eq!(id, "r2");
        assert_eq!(limits, RunLimits::DEFAULT.max_tool_calls(1));
    }

    #[test]
    fn a_fault_line_takes_one_by_default() {
        let line = StoryLine::parse(r#"{"fault": {"route": "POST /r", "kind": "unavailable"}}"#);
        assert_eq!(
            line.unwrap(),
            StoryLine::Fault {
                route: Route::post("/r"),
                fault: Fault::Unavailable,
                times: 1
            }
        );
    }

    #[test]
    fn a_bad_line_says_what_is_wrong() {
        for (text, needle) in [
            ("{", "not a JSON object"),
            ("[1]", "a JSON object with one key"),
            ("{}", "exactly one key"),
            (r#"{"run": "a", "restart": {}}"#, "exactly one key"),
            (r#"{"rerun": "a"}"#, "unknown line `rerun`"),
            (r#"{"run": ""}"#, "non-empty string"),
            (r#"{"run": {"id": ""}}"#, "non-empty string"),
            (r#"{"run": {"max_steps": 2}}"#, "missing field `id`"),
            (
                r#"{"run": {"id": "r", "max_turns": 2}}"#,
                "unknown field `max_turns`",
            ),
            (r#"{"process": 2}"#, "non-empty string"),
            (r#"{"session": {"tenant": "acme"}}"#, "missing field `user`"),
            (r#"{"restart": {"now": true}}"#, "unknown field `now`"),
            (r#"{"openai": "hi"}"#, "openai"),
            (
                r#"{"fault": {"route": "/refunds", "kind": "unavailable"}}"#,
                "not a route",
            ),
            (
                r#"{"fault": {"route": "POST refunds", "kind": "unavailable"}}"#,
                "not a route",
            ),
            (
                r#"{"fault": {"route": "POST /r", "kind": "slow"}}"#,
                "unknown fault kind `slow`",
            ),
            (
                r#"{"fault": {"route": "POST /r", "kind": "delay"}}"#,
                "needs `ms`",
            ),
            (
                r#"{"fault": {"route": "POST /r", "kind": "rate_limited"}}"#,
                "needs `retry_after_ms`",
            ),
            (
                r#"{"fault": {"route": "POST /r", "kind": "unavailable", "ms": 3}}"#,
                "takes no `ms`",
            ),
            (
                r#"{"approve": {"approver": "m", "reason": "ok", "why": 1}}"#,
                "unknown field `why`",
            ),
        ] {
            let err = StoryLine::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
