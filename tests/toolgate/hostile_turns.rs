//! Hostile model turns in every provider format, read from text as they arrive: a value a JSON
//! tree cannot hold inside one call's arguments (nesting 10,000 deep, `1e999`, a lone surrogate
//! escape), a key given twice in one object, a call id given to several calls, a call without an
//! id next to one that uses the id it would be given. Each affects its own call alone, every call
//! id gets exactly one result, and a write never runs on arguments that are not valid.
//!
//! The property test at the end draws whole turns of such calls; its regressions are kept in
//! `hostile_turns.regressions`. Each turn is answered twice: read with `parse_calls_text` and
//! dispatched, and by `Dispatcher::answer_turn`, which leaves the arguments for the tool to
//! check as it reads them; the two must agree in every report.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate::prelude::*;
use toolgate::provider::{FORMAT_NAMES, Gemini, format_by_name};

/// What the tools did: the order ids they ran for, in order.
#[derive(Default)]
struct Ledger {
    refunds: Mutex<Vec<String>>,
    lookups: Mutex<Vec<String>>,
}

impl Ledger {
    fn refunds(&self) -> Vec<String> {
        self.refunds.lock().unwrap().clone()
    }

    fn lookups(&self) -> Vec<String> {
        self.lookups.lock().unwrap().clone()
    }
}

/// One line of a refund.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct RefundLine {
    /// The item.
    sku: String,
    /// The amount, in cents.
    amount: u32,
}

/// Refund lines of an order.
#[tool(side_effect = "write", key = [order_id])]
async fn issue_refund(
    ctx: &Ctx,
    order_id: String,
    lines: Vec<RefundLine>,
) -> Result<Value, ToolError> {
    let ledger = ctx.state::<Arc<Ledger>>()?;
    ledger.refunds.lock().unwrap().push(order_id.clone());
    let total: u64 = lines.iter().map(|line| u64::from(line.amount)).sum();
    let skus: Vec<&str> = lines.iter().map(|line| line.sku.as_str()).collect();
    Ok(json!({"order_id": order_id, "skus": skus, "refunded": total}))
}

/// Look up an order.
#[tool]
async fn get_order(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
    let ledger = ctx.state::<Arc<Ledger>>()?;
    ledger.lookups.lock().unwrap().push(order_id.clone());
    Ok(json!({"order_id": order_id}))
}

fn desk() -> (Dispatcher, Arc<Ledger>) {
    let mut registry = Registry::new();
    registry
        .register::<issue_refund>()
        .unwrap()
        .register::<get_order>()
        .unwrap();
    let ledger = Arc::new(Ledger::default());
    let dispatcher = Dispatcher::builder(registry)
        .store(toolgate_test::MemoryStore::new())
        .state(ledger.clone())
        .build();
    (dispatcher, ledger)
}

/// How a call names itself.
#[derive(Debug, Clone, PartialEq)]
enum Id {
    Given(String),
    Missing,
    Number(i64),
}

/// One call of a turn: its id, its tool, and the JSON text of its arguments. `field`, when set,
/// is the exact JSON text of the arguments field instead (to write what no encoder writes).
#[derive(Debug, Clone)]
struct Call {
    id: Id,
    name: String,
    arguments: String,
    field: Option<String>,
}

impl Call {
    fn new(id: &str, name: &str, arguments: impl Into<String>) -> Self {
        Call {
            id: Id::Given(id.into()),
            name: name.into(),
            arguments: arguments.into(),
            field: None,
        }
    }
}

fn is_text_format(format: &str) -> bool {
    format.starts_with("openai")
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// The call's arguments field as the format writes it: JSON text in a string for OpenAI's
/// formats, the value itself for the others (as a string when the text is not JSON, so that the
/// turn's own JSON stays valid).
fn arguments_field(format: &str, call: &Call) -> String {
    if let Some(field) = &call.field {
        return field.clone();
    }
    let is_json = serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok();
    if is_text_format(format) || !is_json {
        quoted(&call.arguments)
    } else {
        call.arguments.clone()
    }
}

/// A model turn of `calls` in `format`, as text.
fn turn(format: &str, calls: &[Call]) -> String {
    let items = calls
        .iter()
        .map(|call| {
            let id = |key: &str| match &call.id {
                Id::Missing => String::new(),
                Id::Given(id) => format!(r#""{key}":{},"#, quoted(id)),
                Id::Number(id) => format!(r#""{key}":{id},"#),
            };
            let name = quoted(&call.name);
            let args = arguments_field(format, call);
            match format {
                "openai" | "openai-strict" => format!(
                    r#"{{{}"type":"function","function":{{"name":{name},"arguments":{args}}}}}"#,
                    id("id")
                ),
                "openai-responses" => format!(
                    r#"{{"type":"function_call",{}"name":{name},"arguments":{args},"status":"completed"}}"#,
                    id("call_id")
                ),
                "anthropic" | "anthropic-strict" => format!(
                    r#"{{"type":"tool_use",{}"name":{name},"input":{args}}}"#,
                    id("id")
                ),
                "gemini" => format!(
                    r#"{{"functionCall":{{{}"name":{name},"args":{args}}}}}"#,
                    id("id")
                ),
                "mcp" => format!(
                    r#"{{"jsonrpc":"2.0",{}"method":"tools/call","params":{{"name":{name},"arguments":{args}}}}}"#,
                    id("id")
                ),
                other => unreachable!("{other}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    match format {
        "openai" | "openai-strict" => {
            format!(r#"{{"role":"assistant","content":null,"tool_calls":[{items}]}}"#)
        }
        "openai-responses" => format!(r#"{{"id":"resp_1","output":[{items}]}}"#),
        "anthropic" | "anthropic-strict" => {
            let text = r#"{"type":"text","text":"On it."}"#;
            let blocks = if items.is_empty() {
                text.to_owned()
            } else {
                format!("{text},{items}")
            };
            format!(r#"{{"role":"assistant","content":[{blocks}]}}"#)
        }
        "gemini" => format!(r#"{{"role":"model","parts":[{items}]}}"#),
        "mcp" => format!("[{items}]"),
        other => unreachable!("{other}"),
    }
}

/// The call id a format gives a call whose id the model sent as the string `id`.
fn call_id(format: &str, id: &str) -> String {
    if format == "mcp" {
        quoted(id)
    } else {
        id.to_owned()
    }
}

/// One turn played: the reports, and what ran.
struct Played {
    reports: Vec<CallReport>,
    ledger: Arc<Ledger>,
}

impl Played {
    fn report(&self, id: &str) -> &CallReport {
        let found: Vec<_> = self.reports.iter().filter(|r| r.call_id == id).collect();
        assert_eq!(found.len(), 1, "one report for {id}: {:#?}", self.reports);
        found[0]
    }

    fn error(&self, id: &str) -> (String, String, String, String) {
        let result = self.report(id).result.to_json();
        let error = &result["error"];
        let text = |key: &str| error[key].as_str().unwrap_or_default().to_owned();
        (text("kind"), text("what"), text("why"), text("next"))
    }

    fn status(&self, id: &str) -> String {
        self.report(id).result.to_json()["status"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// Parses `text` as `format` with the text API, dispatches and renders it.
async fn play(format: &str, text: &str, run: &str) -> Played {
    let wire = format_by_name(format).unwrap();
    let calls = match wire.parse_calls_text(text) {
        Ok(calls) => calls,
        Err(err) => panic!("{format}: the turn was refused whole: {err}\n{}", cut(text)),
    };
    let (dispatcher, ledger) = desk();
    let session = crate::support::session_in(run);
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    let rendered = wire
        .render_results_text(&reports)
        .map(|text| serde_json::from_str(&text).unwrap());
    check_rendered(format, &reports, rendered.as_ref());
    Played { reports, ledger }
}

fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(400)]
}

/// The rendered answer has one entry per report, each under its report's id (where the format
/// writes one); a turn without reports has no answer.
fn check_rendered(format: &str, reports: &[CallReport], rendered: Option<&Value>) {
    let Some(rendered) = rendered else {
        assert!(
            reports.is_empty(),
            "{format}: {} reports, no answer",
            reports.len()
        );
        return;
    };
    let entries: Vec<&Value> = match format {
        "anthropic" | "anthropic-strict" => {
            rendered["content"].as_array().unwrap().iter().collect()
        }
        "gemini" => rendered["parts"].as_array().unwrap().iter().collect(),
        "mcp" if reports.len() == 1 => vec![rendered],
        _ => rendered.as_array().unwrap().iter().collect(),
    };
    assert_eq!(entries.len(), reports.len(), "{format}: {rendered}");
    for (entry, report) in entries.iter().zip(reports) {
        let id = match format {
            "openai" | "openai-strict" => entry["tool_call_id"].as_str().map(str::to_owned),
            "openai-responses" => entry["call_id"].as_str().map(str::to_owned),
            "anthropic" | "anthropic-strict" => entry["tool_use_id"].as_str().map(str::to_owned),
            "gemini" => entry["functionResponse"]["id"].as_str().map(str::to_owned),
            _ => Some(&entry["id"])
                .filter(|id| !id.is_null())
                .map(Value::to_string),
        };
        match id {
            Some(id) => assert_eq!(id, report.call_id, "{format}: {entry}"),
            None => assert!(
                (format == "gemini" && Gemini::is_generated_id(&report.call_id))
                    || (format == "mcp" && report.call_id.starts_with("missing_id_")),
                "{format}: no id for {} in {entry}",
                report.call_id
            ),
        }
    }
}

const LOOKUP: &str = r#"{"order_id": "ORD-7"}"#;
const REFUND: &str = r#"{"order_id": "ORD-8", "lines": [{"sku": "A", "amount": 500}]}"#;

/// Arguments nested `depth` deep inside the object of a lookup.
fn nested(depth: usize) -> String {
    format!(
        r#"{{"order_id": {}"ORD-1"{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

#[tokio::test]
async fn one_hostile_value_fails_its_own_call_and_its_siblings_run() {
    let hostile = [
        ("nesting 10,000 deep", nested(10_000)),
        (
            "a number beyond f64",
            r#"{"order_id": "ORD-1", "lines": [{"sku": "A", "amount": 1e999}]}"#.into(),
        ),
        (
            "a lone surrogate escape",
            r#"{"order_id": "ORD-\ud800"}"#.into(),
        ),
    ];
    for format in FORMAT_NAMES {
        for (label, arguments) in &hostile {
            let calls = [
                Call::new("a", "get_order", LOOKUP),
                Call::new("b", "issue_refund", arguments.clone()),
                Call::new("c", "issue_refund", REFUND),
            ];
            let played = play(format, &turn(format, &calls), "run-1").await;
            let context = format!("{format}, {label}");
            assert_eq!(played.reports.len(), 3, "{context}");
            assert_eq!(
                played.status(&call_id(format, "a")),
                "succeeded",
                "{context}"
            );
            assert_eq!(
                played.status(&call_id(format, "c")),
                "succeeded",
                "{context}"
            );
            let (kind, what, why, next) = played.error(&call_id(format, "b"));
            assert_eq!(kind, "invalid_arguments", "{context}");
            assert_eq!(
                what, "the arguments hold a value that cannot be read",
                "{context}"
            );
            // The excerpt of 10,000 brackets is cut.
            assert!(why.chars().count() < 600, "{context}: {why}");
            assert_eq!(
                next, "fix the arguments: call issue_refund again with them as one JSON object",
                "{context}"
            );
            assert_eq!(played.ledger.refunds(), ["ORD-8"], "{context}");
            assert_eq!(played.ledger.lookups(), ["ORD-7"], "{context}");
        }
    }
}

#[tokio::test]
async fn a_lone_surrogate_in_the_arguments_string_itself_fails_that_call_alone() {
    // OpenAI's arguments are JSON text inside a JSON string: the escape is in the string.
    for format in ["openai", "openai-strict", "openai-responses"] {
        let mut bad = Call::new("b", "get_order", "");
        bad.field = Some(r#""{\"order_id\": \"ORD-\ud800\"}""#.into());
        let calls = [Call::new("a", "get_order", LOOKUP), bad];
        let played = play(format, &turn(format, &calls), "run-1").await;
        assert_eq!(played.status("a"), "succeeded", "{format}");
        let (kind, what, ..) = played.error("b");
        assert_eq!(kind, "invalid_arguments", "{format}");
        assert_eq!(
            what, "the arguments hold a value that cannot be read",
            "{format}"
        );
        assert_eq!(played.ledger.lookups(), ["ORD-7"], "{format}");
    }
}

#[test]
fn a_turn_whose_own_json_is_not_valid_is_still_refused_whole() {
    for format in FORMAT_NAMES {
        let wire = format_by_name(format).unwrap();
        let good = turn(format, &[Call::new("a", "get_order", LOOKUP)]);
        // Cut short, with more after it, and a value outside the arguments that a tree cannot
        // hold: the tool name as `1e999`, or with a lone surrogate escape.
        for text in [
            good[..good.len() - 1].to_owned(),
            format!("{good} x"),
            good.replacen("\"get_order\"", "1e999", 1),
            good.replacen("\"get_order\"", "\"\\ud800\"", 1),
        ] {
            let err = wire.parse_calls_text(&text).unwrap_err();
            assert_eq!(err.format, format);
            assert!(
                err.reason.starts_with("the turn is not valid JSON"),
                "{format}: {err}"
            );
        }
    }
}

#[tokio::test]
async fn a_tree_nested_10000_deep_by_hand_is_malformed_not_a_stack_overflow() {
    // The tree API cannot meet this from text (serde_json stops at 128); a tree built in code can.
    let mut deep = json!("ORD-1");
    for _ in 0..10_000 {
        deep = Value::Array(vec![deep]);
    }
    let input = Value::Object(Map::from_iter([("order_id".to_owned(), deep)]));
    let block = Value::Object(Map::from_iter([
        ("type".to_owned(), json!("tool_use")),
        ("id".to_owned(), json!("b")),
        ("name".to_owned(), json!("get_order")),
        ("input".to_owned(), input),
    ]));
    let turn = Value::Object(Map::from_iter([(
        "content".to_owned(),
        Value::Array(vec![block]),
    )]));
    let anthropic = format_by_name("anthropic").unwrap();
    let calls = anthropic.parse_calls(&turn).unwrap();
    let (dispatcher, ledger) = desk();
    let session = crate::support::session();
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    let rendered = anthropic.render_results(&reports).unwrap();
    let result: Value =
        serde_json::from_str(rendered["content"][0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error"]["kind"], "invalid_arguments");
    assert_eq!(
        result["error"]["what"],
        "the arguments hold a value that cannot be read"
    );
    assert!(ledger.lookups().is_empty());
    // serde_json drops a tree recursively: this one is left for the process to reclaim.
    std::mem::forget(turn);
}

#[tokio::test]
async fn a_call_id_given_to_several_calls_gets_one_result_and_none_of_them_runs() {
    for format in FORMAT_NAMES {
        let calls = [
            Call::new("dup", "issue_refund", REFUND),
            Call::new("x", "get_order", LOOKUP),
            Call::new("dup", "issue_refund", REFUND.replace("ORD-8", "ORD-9")),
            Call::new("dup", "get_order", LOOKUP.replace("ORD-7", "ORD-6")),
        ];
        let played = play(format, &turn(format, &calls), "run-1").await;
        let dup = call_id(format, "dup");
        let ids: Vec<&str> = played.reports.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, [dup.as_str(), &call_id(format, "x")], "{format}");
        let (kind, what, why, next) = played.error(&dup);
        assert_eq!(kind, "invalid_arguments", "{format}");
        assert_eq!(
            what,
            format!(
                "the call id {} was given to 3 calls in this turn",
                quoted(&dup)
            ),
            "{format}"
        );
        assert_eq!(
            why, "a result could not be matched to one of them, so none of them ran",
            "{format}"
        );
        assert_eq!(
            next, "fix the call ids: call the tools again, giving each call its own id",
            "{format}"
        );
        assert_eq!(played.report(&dup).tool, "issue_refund");
        assert!(played.ledger.refunds().is_empty(), "{format}");
        assert_eq!(played.ledger.lookups(), ["ORD-7"], "{format}");
    }
}

#[tokio::test]
async fn a_generated_id_never_takes_an_id_the_model_sent() {
    for format in FORMAT_NAMES {
        // The id the second call, which has none, would be given by its position.
        let taken = if format == "gemini" {
            Gemini::generated_id(1)
        } else {
            format!("missing_id_{}", 1)
        };
        let mut missing = Call::new("", "get_order", LOOKUP.replace("ORD-7", "ORD-2"));
        missing.id = Id::Missing;
        let calls = [Call::new(&taken, "get_order", LOOKUP), missing];
        let played = play(format, &turn(format, &calls), "run-1").await;
        assert_eq!(played.reports.len(), 2, "{format}");
        let first = &played.reports[0];
        let second = &played.reports[1];
        assert_eq!(first.call_id, call_id(format, &taken), "{format}");
        assert_ne!(first.call_id, second.call_id, "{format}");
        assert_eq!(played.status(&first.call_id), "succeeded", "{format}");
        if format == "gemini" {
            // A Gemini call without an id is not malformed: it runs, under a generated id.
            assert!(Gemini::is_generated_id(&second.call_id));
            assert_eq!(played.status(&second.call_id), "succeeded");
            assert_eq!(played.ledger.lookups(), ["ORD-7", "ORD-2"]);
        } else {
            let (kind, what, why, _) = played.error(&second.call_id);
            assert_eq!(kind, "invalid_arguments", "{format}");
            assert_eq!(what, "the call has no id", "{format}");
            let named = format!("the call was given the id {}", second.call_id);
            assert!(why.ends_with(&named), "{format}: {why}");
            assert_eq!(played.ledger.lookups(), ["ORD-7"], "{format}");
        }
    }
}

#[tokio::test]
async fn a_key_given_twice_is_refused_at_any_depth_and_nothing_runs() {
    let cases = [
        (
            "issue_refund",
            r#"{"order_id": "ORD-1", "lines": [{"sku": "A", "amount": 5}], "lines": [{"sku": "A", "amount": 5000}]}"#,
            "lines",
            "/lines",
        ),
        (
            "issue_refund",
            r#"{"order_id": "ORD-1", "lines": [{"sku": "A", "amount": 5, "amount": 5000}]}"#,
            "amount",
            "/lines/0/amount",
        ),
        // A read whose arguments the tool's own types read from the text.
        (
            "get_order",
            r#"{"order_id": "ORD-1", "order_id": "ORD-2"}"#,
            "order_id",
            "/order_id",
        ),
    ];
    for format in FORMAT_NAMES {
        for (tool, arguments, key, pointer) in cases {
            let calls = [
                Call::new("a", tool, arguments),
                Call::new("b", "get_order", LOOKUP),
            ];
            let played = play(format, &turn(format, &calls), "run-1").await;
            let (kind, what, why, _) = played.error(&call_id(format, "a"));
            assert_eq!(kind, "invalid_arguments", "{format}: {arguments}");
            assert_eq!(
                what,
                format!("the arguments give the key \"{key}\" more than once"),
                "{format}"
            );
            assert!(
                why.starts_with(&format!("{pointer} appears twice in one object")),
                "{format}: {why}"
            );
            assert_eq!(played.status(&call_id(format, "b")), "succeeded");
            assert!(played.ledger.refunds().is_empty(), "{format}: {arguments}");
            assert_eq!(played.ledger.lookups(), ["ORD-7"], "{format}: {arguments}");
        }
    }
}

// The property: whole turns of arbitrary and hostile calls.

/// What a call's arguments hold; the order id in them is `ORD-{position}`, so that what ran can
/// be traced to the call that asked for it.
#[derive(Debug, Clone)]
enum Args {
    /// Valid for `issue_refund`.
    Refund(u32),
    /// Valid for `get_order`.
    Lookup,
    /// Valid for `get_order`: an order id with a valid surrogate pair.
    Emoji,
    /// Valid for `get_order`: an order id of this many more bytes.
    HugeString(usize),
    /// Nested this deep, in the order id or as the whole arguments.
    Deep(usize, bool),
    /// A refund line whose amount is this number literal (never a valid `u32`).
    Number(&'static str),
    /// An order id with this lone surrogate escape.
    Lone(&'static str),
    /// A key given twice: the order id, or an amount inside a line.
    Duplicate(bool),
    /// Any JSON that is valid for neither tool (no string `order_id`).
    Wrong(Value),
    /// Text that is not JSON.
    NotJson(&'static str),
    /// The arguments field itself holds a lone surrogate escape.
    LoneField,
}

impl Args {
    fn text(&self, position: usize) -> String {
        let order = format!("ORD-{position}");
        let refund = |amount: &str| {
            format!(r#"{{"order_id": "{order}", "lines": [{{"sku": "A", "amount": {amount}}}]}}"#)
        };
        match self {
            Args::Refund(amount) => refund(&amount.to_string()),
            Args::Lookup => format!(r#"{{"order_id": "{order}"}}"#),
            Args::Emoji => format!(r#"{{"order_id": "{order}-\ud83d\ude00"}}"#),
            Args::HugeString(len) => format!(r#"{{"order_id": "{order}-{}"}}"#, "x".repeat(*len)),
            Args::Deep(depth, false) => format!(
                r#"{{"order_id": {}"{order}"{}}}"#,
                "[".repeat(*depth),
                "]".repeat(*depth)
            ),
            Args::Deep(depth, true) => format!("{}1{}", "[".repeat(*depth), "]".repeat(*depth)),
            Args::Number(number) => refund(number),
            Args::Lone(escape) => format!(r#"{{"order_id": "{order}{escape}"}}"#),
            Args::Duplicate(false) => {
                format!(r#"{{"order_id": "{order}-first", "order_id": "{order}"}}"#)
            }
            Args::Duplicate(true) => format!(
                r#"{{"order_id": "{order}", "lines": [{{"sku": "A", "amount": 5, "amount": 5000}}]}}"#
            ),
            Args::Wrong(value) => value.to_string(),
            Args::NotJson(text) => (*text).to_owned(),
            Args::LoneField => format!(r#"{{"order_id": "{order}"}}"#),
        }
    }

    /// The one tool these arguments are valid for, if any.
    fn valid_for(&self) -> Option<&'static str> {
        match self {
            Args::Refund(_) => Some("issue_refund"),
            Args::Lookup | Args::Emoji | Args::HugeString(_) => Some("get_order"),
            _ => None,
        }
    }

    fn call(&self, position: usize, format: &str, id: Id, name: &str) -> Call {
        let field = match self {
            Args::LoneField if is_text_format(format) => {
                Some(format!(r#""{{\"order_id\": \"ORD-{position}\ud800\"}}""#))
            }
            Args::LoneField => Some(r#""\udc00""#.into()),
            _ => None,
        };
        Call {
            id,
            name: name.into(),
            arguments: self.text(position),
            field,
        }
    }
}

fn wrong_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z\\u{e9}\\u{1f600}\"\\\\]{0,8}".prop_map(Value::from),
    ];
    let tree = leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec!["lines", "sku", "amount", "order", "x"]),
                    inner
                ),
                0..4
            )
            .prop_map(|members| Value::Object(
                members
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect()
            )),
        ]
    });
    prop_oneof![
        tree,
        // An order id, but never a string.
        prop_oneof![
            Just(json!(5)),
            Just(json!(null)),
            Just(json!(["ORD-1"])),
            Just(json!({}))
        ]
        .prop_map(|order| json!({"order_id": order})),
        Just(json!({"order_id": "ORD-1", "lines": "all"})),
    ]
}

fn any_args() -> impl Strategy<Value = Args> {
    prop_oneof![
        6 => (0u32..100_000).prop_map(Args::Refund),
        4 => Just(Args::Lookup),
        1 => Just(Args::Emoji),
        1 => prop_oneof![Just(1_000usize), Just(100_000)].prop_map(Args::HugeString),
        3 => (
            prop::sample::select(vec![1usize, 100, 125, 126, 127, 128, 129, 1_000, 10_000]),
            any::<bool>()
        )
            .prop_map(|(depth, whole)| Args::Deep(depth, whole)),
        2 => prop::sample::select(vec!["1e999", "-1e400", "1e308", "-1", "4294967296", "0.5"])
            .prop_map(Args::Number),
        2 => prop::sample::select(vec!["\\ud800", "\\udc00", "\\ud800x", "\\ud800\\ud800", "\\ude00\\ud83d"])
            .prop_map(Args::Lone),
        3 => any::<bool>().prop_map(Args::Duplicate),
        3 => wrong_json().prop_map(Args::Wrong),
        1 => prop::sample::select(vec!["", "{\"order_id\": ", "{order_id: 1}", "{} {}", "\"\\x\""])
            .prop_map(Args::NotJson),
        1 => Just(Args::LoneField),
    ]
}

fn any_id() -> impl Strategy<Value = Id> {
    let given = prop::sample::select(vec![
        "c0",
        "c1",
        "c2",
        "call_\"x\"",
        "missing_id_0",
        "missing_id_1",
        "missing_id_2",
        "gemini_call_0",
        "gemini_call_1",
    ]);
    prop_oneof![
        8 => given.prop_map(|id| Id::Given(id.to_owned())),
        2 => Just(Id::Missing),
        1 => Just(Id::Given(String::new())),
        1 => Just(Id::Number(7)),
    ]
}

/// A whole turn: its format and its calls.
fn any_turn() -> impl Strategy<Value = (&'static str, Vec<(Id, &'static str, Args)>)> {
    let name = prop::sample::select(vec![
        "issue_refund",
        "issue_refund",
        "get_order",
        "get_order",
        "nope",
        "",
    ]);
    (
        prop::sample::select(FORMAT_NAMES.to_vec()),
        prop::collection::vec((any_id(), name, any_args()), 0..7),
    )
}

/// The id a call ends up with when the model's id is usable in `format`; `None` when the call
/// gets a generated one.
fn model_id(format: &str, id: &Id) -> Option<String> {
    match (format, id) {
        ("mcp", Id::Given(id)) => Some(quoted(id)),
        ("mcp", Id::Number(id)) => Some(id.to_string()),
        (_, Id::Given(id)) if !id.is_empty() => Some(id.clone()),
        _ => None,
    }
}

/// Whether a call without a usable model id is malformed for that alone (Gemini gives a call
/// without an id one, but an id that is not a string is unusable there too).
fn id_is_a_problem(format: &str, id: &Id) -> bool {
    let gemini_fills_it = format == "gemini" && !matches!(id, Id::Number(_));
    model_id(format, id).is_none() && !gemini_fills_it
}

/// Plays one drawn turn and checks every property of it.
fn check_turn(
    runtime: &tokio::runtime::Runtime,
    run: usize,
    format: &'static str,
    drawn: &[(Id, &'static str, Args)],
) -> Result<(), TestCaseError> {
    let calls: Vec<Call> = drawn
        .iter()
        .enumerate()
        .map(|(position, (id, name, args))| args.call(position, format, id.clone(), name))
        .collect();
    let text = turn(format, &calls);
    let wire = format_by_name(format).unwrap();
    let parsed = wire.parse_calls_text(&text);
    prop_assert!(parsed.is_ok(), "{format}: {:?}\n{}", parsed, cut(&text));
    let parsed = parsed.unwrap();
    prop_assert_eq!(parsed.len(), calls.len());

    // Where the tree API can read the turn at all, and no key is given twice (a tree cannot
    // show that), both readings agree.
    let has_duplicate = drawn
        .iter()
        .any(|(_, _, args)| matches!(args, Args::Duplicate(_)));
    if let (Ok(tree), false) = (serde_json::from_str::<Value>(&text), has_duplicate) {
        prop_assert_eq!(&wire.parse_calls(&tree).unwrap(), &parsed, "{}", cut(&text));
    }

    let (dispatcher, ledger) = desk();
    let session = crate::support::session_in(format!("run-{run}"));
    let reports = runtime
        .block_on(dispatcher.dispatch_turn(&session, parsed.clone()))
        .unwrap();

    // Every distinct call id, exactly once, in the order of first appearance.
    let mut distinct: Vec<&str> = Vec::new();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for call in &parsed {
        if !distinct.contains(&call.id.as_str()) {
            distinct.push(&call.id);
        }
        *count.entry(&call.id).or_default() += 1;
    }
    let answered: Vec<&str> = reports.iter().map(|r| r.call_id.as_str()).collect();
    prop_assert_eq!(&answered, &distinct);
    for report in &reports {
        if count[report.call_id.as_str()] > 1 {
            prop_assert_eq!(
                report.result.error_kind(),
                Some(ErrorKind::InvalidArguments)
            );
        }
    }
    let rendered: Option<Value> = wire
        .render_results_text(&reports)
        .map(|text| serde_json::from_str(&text).unwrap());
    check_rendered(format, &reports, rendered.as_ref());
    prop_assert_eq!(wire.render_results(&reports), rendered);

    // A tool ran for exactly the calls that are valid: their tool, their arguments valid for it,
    // an id of their own.
    let model_ids: Vec<Option<String>> =
        drawn.iter().map(|(id, ..)| model_id(format, id)).collect();
    let ran = |tool: &str, ledger: Vec<String>| -> Result<(), TestCaseError> {
        let mut runs = vec![0; drawn.len()];
        for order in ledger {
            let digits: String = order["ORD-".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            runs[digits.parse::<usize>().unwrap()] += 1;
        }
        for (position, (id, name, args)) in drawn.iter().enumerate() {
            let own_id = match &model_ids[position] {
                Some(id) => {
                    model_ids
                        .iter()
                        .flatten()
                        .filter(|other| *other == id)
                        .count()
                        == 1
                }
                None => !id_is_a_problem(format, id),
            };
            let valid = *name == tool && args.valid_for() == Some(tool) && own_id;
            prop_assert_eq!(
                runs[position],
                usize::from(valid),
                "{} for call {} ({:?}, {:?}) in {}",
                tool,
                position,
                id,
                args,
                cut(&text)
            );
        }
        Ok(())
    };
    ran("issue_refund", ledger.refunds())?;
    ran("get_order", ledger.lookups())?;

    // `answer_turn` leaves each call's arguments for the tool to check as it reads them (one
    // pass over the text): the same reports, the same answer, the same runs.
    let (dispatcher, answered_ledger) = desk();
    let session = crate::support::session_in(format!("run-{run}"));
    let answer = runtime
        .block_on(dispatcher.answer_turn(&*wire, &session, &text))
        .unwrap();
    prop_assert_eq!(&answer.reports, &reports, "{}", cut(&text));
    prop_assert_eq!(
        answer.message.map(|text| text.into_string()),
        wire.render_results_text(&reports)
    );
    prop_assert_eq!(answered_ledger.refunds(), ledger.refunds());
    prop_assert_eq!(answered_ledger.lookups(), ledger.lookups());
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn config() -> Config {
    Config {
        cases: 1_000,
        rng_seed: RngSeed::Fixed(0x7001_6a7e),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_call_id_is_answered_once_and_no_tool_runs_on_invalid_arguments(
        (format, drawn) in any_turn()
    ) {
        thread_local!(static RUNTIME: tokio::runtime::Runtime = runtime());
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RUNTIME.with(|runtime| check_turn(runtime, run, format, &drawn))?;
    }
}

#[test]
fn the_edges_of_the_property_hold_in_every_format() {
    // The cases the generator reaches only by chance, played in every format: the deepest
    // nesting, each hostile value next to valid calls, ids reused and missing together.
    let runtime = runtime();
    let all = [
        Args::Deep(10_000, false),
        Args::Deep(10_000, true),
        Args::Number("1e999"),
        Args::Lone("\\ud800"),
        Args::Duplicate(false),
        Args::Duplicate(true),
        Args::HugeString(100_000),
        Args::LoneField,
        Args::NotJson("{\"order_id\": "),
        Args::Refund(5),
        Args::Lookup,
        Args::Emoji,
    ];
    for (run, format) in FORMAT_NAMES.into_iter().enumerate() {
        let mut drawn: Vec<(Id, &'static str, Args)> = all
            .iter()
            .enumerate()
            .map(|(position, args)| {
                let name = args.valid_for().unwrap_or("issue_refund");
                (Id::Given(format!("c{position}")), name, args.clone())
            })
            .collect();
        drawn.push((Id::Missing, "get_order", Args::Lookup));
        // The ids the call without one would be given by its position.
        drawn.push((Id::Given("missing_id_12".into()), "get_order", Args::Lookup));
        drawn.push((
            Id::Given("gemini_call_12".into()),
            "get_order",
            Args::Lookup,
        ));
        drawn.push((Id::Given("c9".into()), "issue_refund", Args::Refund(7)));
        check_turn(&runtime, run, format, &drawn).unwrap();
    }
}
