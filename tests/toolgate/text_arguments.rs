//! Arguments that arrive as JSON text (OpenAI's formats) skip the tree and the schema validator
//! when the tool's parameter types decide exactly as its schema would (the reading of text
//! `#[tool]` generates, `__private::TextArgs`).
//!
//! Property: for any argument text, the model gets the same result whether the text is read
//! straight into the parameters or parsed, validated against the schema and deserialized.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::{
    __private::TextArgs,
    Tool,
    tool::{ToolDescriptor, ToolFuture},
};

use crate::support::json_args;
use json_args::any_number;

/// Takes one argument of each type whose serde reading is exact, and echoes them.
#[tool(permission = "echo")]
async fn plain(
    name: String,
    flag: bool,
    tiny: i8,
    count: u8,
    small: i16,
    port: u16,
    year: i32,
    id: u32,
    total: i64,
    big: u64,
    offset: isize,
    size: usize,
    ratio: f64,
    note: Option<String>,
    limit: Option<u32>,
    tags: Vec<String>,
    weights: Vec<i16>,
) -> Result<Value, ToolError> {
    Ok(json!({
        "name": name, "flag": flag, "tiny": tiny, "count": count, "small": small, "port": port,
        "year": year, "id": id, "total": total, "big": big, "offset": offset, "size": size,
        // `-0.0 + 0.0` is `0.0`: the sign of a zero is the one thing the two paths may read
        // differently (the validated path reads `-0.0` as the integer 0).
        "ratio": ratio + 0.0,
        "note": note, "limit": limit, "tags": tags, "weights": weights,
    }))
}

/// A `char` is not among the types `#[tool]` reads straight from text: the validated path.
#[tool]
async fn initial(letter: char, name: String) -> Result<String, ToolError> {
    Ok(format!("{letter}{name}"))
}

/// A `#[schemars]` bound the type does not know of: the validated path.
#[tool]
async fn bounded(#[schemars(range(min = 1, max = 10))] count: u32) -> Result<u32, ToolError> {
    Ok(count)
}

const FIELDS: [&str; 17] = [
    "name", "flag", "tiny", "count", "small", "port", "year", "id", "total", "big", "offset",
    "size", "ratio", "note", "limit", "tags", "weights",
];

/// A registered tool that counts the calls its arguments' text was read straight into.
struct Counting<T> {
    tool: T,
    taken: Arc<AtomicUsize>,
}

impl<T: Tool> Tool for Counting<T> {
    fn descriptor(&self) -> &'static ToolDescriptor {
        self.tool.descriptor()
    }

    fn args_schema(&self) -> Value {
        self.tool.args_schema()
    }

    fn invoke<'a>(&'a self, ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
        self.tool.invoke(ctx, args)
    }

    fn text_args(&self) -> Option<&dyn TextArgs> {
        // Counted only where the wrapped tool has a reading of text.
        self.tool.text_args().map(|_| self as &dyn TextArgs)
    }
}

/// The wrapped tool's reading of text, counted.
impl<T: Tool> TextArgs for Counting<T> {
    fn invoke_text<'a>(&'a self, ctx: &'a Ctx, text: &'a str) -> Option<ToolFuture<'a>> {
        let call = self.tool.text_args()?.invoke_text(ctx, text);
        if call.is_some() {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        call
    }
}

struct Desk {
    dispatcher: Dispatcher,
    runtime: tokio::runtime::Runtime,
    taken: Arc<AtomicUsize>,
}

impl Desk {
    fn new() -> Self {
        let taken = Arc::new(AtomicUsize::new(0));
        let mut registry = Registry::new();
        registry
            .register_tool(Counting {
                tool: plain::default(),
                taken: taken.clone(),
            })
            .unwrap()
            .register_tool(Counting {
                tool: initial::default(),
                taken: taken.clone(),
            })
            .unwrap()
            .register_tool(Counting {
                tool: bounded::default(),
                taken: taken.clone(),
            })
            .unwrap();
        Desk {
            dispatcher: Dispatcher::builder(registry).build(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap(),
            taken,
        }
    }

    fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }

    fn dispatch(&self, permissions: &[&str], call: ToolCall) -> Result<CallReport, String> {
        let session = Session::new(
            crate::support::agent().with_permissions(permissions.iter().copied()),
            "run",
        );
        self.runtime
            .block_on(self.dispatcher.dispatch(&session, call))
            .map_err(|aborted| aborted.to_string())
    }

    /// The result by the text path and by the validated path, and whether the text path read the
    /// text itself.
    fn both(&self, tool: &str, text: &str) -> (Value, Value, bool) {
        let tree: Value = serde_json::from_str(text).unwrap();
        let by_tree = self
            .dispatch(&["echo"], ToolCall::new("c", tool, tree))
            .unwrap();
        let before = self.taken();
        let by_text = self
            .dispatch(&["echo"], ToolCall::from_json_text("c", tool, text))
            .unwrap();
        (
            by_text.result.to_json(),
            by_tree.result.to_json(),
            self.taken() > before,
        )
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any_number(),
        "[a-z\"\\\\é\u{1}]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec((key(), inner), 0..3)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(FIELDS.to_vec()).prop_map(str::to_owned),
        "[a-z]{1,3}",
    ]
}

/// A plausible value for each field, right or wrong.
fn field_value(field: &'static str) -> BoxedStrategy<Value> {
    let good: BoxedStrategy<Value> = match field {
        "name" => "[a-zé\"\\\\ ]{0,6}".prop_map(Value::from).boxed(),
        "flag" => any::<bool>().prop_map(Value::from).boxed(),
        "tiny" => any::<i8>().prop_map(Value::from).boxed(),
        "count" => any::<u8>().prop_map(Value::from).boxed(),
        "small" => any::<i16>().prop_map(Value::from).boxed(),
        "port" => any::<u16>().prop_map(Value::from).boxed(),
        "year" => any::<i32>().prop_map(Value::from).boxed(),
        "id" => any::<u32>().prop_map(Value::from).boxed(),
        "total" => any::<i64>().prop_map(Value::from).boxed(),
        "big" => any::<u64>().prop_map(Value::from).boxed(),
        "offset" => any::<i64>().prop_map(Value::from).boxed(),
        "size" => any::<u64>().prop_map(Value::from).boxed(),
        "ratio" => any_number().boxed(),
        "note" => prop::option::of("[a-z]{0,4}")
            .prop_map(|note| json!(note))
            .boxed(),
        "limit" => prop::option::of(any::<u32>())
            .prop_map(|limit| json!(limit))
            .boxed(),
        "tags" => prop::collection::vec("[a-z]{0,3}", 0..3)
            .prop_map(|tags| json!(tags))
            .boxed(),
        "weights" => prop::collection::vec(any::<i16>(), 0..3)
            .prop_map(|weights| json!(weights))
            .boxed(),
        _ => unreachable!(),
    };
    prop_oneof![40 => good, 1 => any_json(), 1 => any_number()].boxed()
}

/// Objects that are mostly right: optional fields left out now and then, a wrong value or a
/// stray field sometimes.
fn near_valid_args() -> impl Strategy<Value = Value> {
    let present = |field: &str| {
        if matches!(field, "note" | "limit") {
            0.7
        } else {
            0.998
        }
    };
    let stray = (key(), any_json()).prop_map(|stray| vec![stray]);
    json_args::near_valid(&FIELDS, present, field_value, stray, 20)
}

/// The text of `args`, written one of a few ways a model writes it, each with whether it gives
/// a key twice.
fn texts(args: &Value) -> Vec<(String, bool)> {
    let compact = args.to_string();
    let mut texts = vec![
        (compact.clone(), false),
        (serde_json::to_string_pretty(args).unwrap(), false),
    ];
    // A field added at the end, given twice when the object has it already.
    if let Some(inner) = compact.strip_suffix('}')
        && inner.len() > 1
    {
        let twice = args.get("name").is_some();
        texts.push((format!(r#"{inner},"name":"again"}}"#), twice));
    }
    texts
}

/// Every text of `args` gets the answer its tree gets, but for a key given twice: the tree kept
/// one of the values and cannot tell, the text shows it and is refused.
fn check_texts(desk: &Desk, args: &Value) -> Result<(), TestCaseError> {
    for (text, twice) in texts(args) {
        let (by_text, by_tree, _) = desk.both("plain", &text);
        if twice {
            prop_assert_eq!(
                &by_text["error"]["what"],
                "the arguments give the key \"name\" more than once",
                "{}",
                text
            );
        } else {
            prop_assert_eq!(by_text, by_tree, "{}", text);
        }
    }
    Ok(())
}

fn config() -> Config {
    Config {
        cases: 1_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_text_path_answers_as_the_validated_path(args in near_valid_args()) {
        check_texts(&Desk::new(), &args)?;
    }

    #[test]
    fn on_arbitrary_objects_too(args in prop::collection::vec((key(), any_json()), 0..6)) {
        let desk = Desk::new();
        let args = Value::Object(args.into_iter().collect());
        check_texts(&desk, &args)?;
    }
}

#[test]
fn both_paths_are_exercised() {
    // The generator must reach the text path as well as the validated one, or the property
    // says little.
    let desk = Desk::new();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut read, mut validated, mut succeeded) = (0, 0, 0);
    for _ in 0..400 {
        let args = near_valid_args().new_tree(&mut runner).unwrap().current();
        let (by_text, by_tree, taken) = desk.both("plain", &args.to_string());
        assert_eq!(by_text, by_tree);
        if taken {
            read += 1;
        } else {
            validated += 1;
        }
        if by_text["status"] == "succeeded" {
            succeeded += 1;
        }
    }
    assert!(
        read > 100 && validated > 50 && succeeded > read / 2,
        "read {read}, validated {validated}, succeeded {succeeded}"
    );
}

fn valid() -> Value {
    json!({
        "name": "n", "flag": true, "tiny": -128, "count": 255, "small": -32768, "port": 65535,
        "year": 2026, "id": 4294967295u32, "total": -9223372036854775808i64,
        "big": 18446744073709551615u64, "offset": -1, "size": 0, "ratio": 1e300,
        "tags": ["a"], "weights": [1, -2]
    })
}

fn with(field: &str, value: Value) -> String {
    let mut args = valid();
    args[field] = value;
    args.to_string()
}

#[test]
fn what_the_text_path_reads_and_what_it_leaves_to_the_validator() {
    let desk = Desk::new();
    // (text, read by the text path, succeeds)
    let cases = [
        (valid().to_string(), true, true),
        (with("note", Value::Null), true, true),
        (with("limit", json!(7)), true, true),
        (with("ratio", json!(2)), true, true),
        // The schema counts 3.0 as an integer; serde does not, so the validator decides.
        (with("count", json!(3.0)), false, true),
        (with("count", json!(256)), false, false),
        (with("tiny", json!(128)), false, false),
        (with("id", json!(-1)), false, false),
        (with("name", json!(5)), false, false),
        (with("tags", json!("a")), false, false),
        (with("extra", json!(1)), false, false),
        (r#"{"name": "only"}"#.to_owned(), false, false),
    ];
    for (text, read, succeeds) in cases {
        let (by_text, by_tree, taken) = desk.both("plain", &text);
        assert_eq!(by_text, by_tree, "{text}");
        assert_eq!(taken, read, "{text}");
        assert_eq!(
            by_text["status"] == "succeeded",
            succeeds,
            "{text}: {by_text}"
        );
    }
    // A field given twice: the tree kept the last one and cannot tell; the text shows it, and
    // is refused before anything reads it.
    let twice = format!(
        r#"{},"name":"last"}}"#,
        valid().to_string().trim_end_matches('}')
    );
    let (by_text, by_tree, taken) = desk.both("plain", &twice);
    assert_eq!(by_tree["status"], "succeeded", "{by_tree}");
    assert_eq!(
        by_text["error"]["what"], "the arguments give the key \"name\" more than once",
        "{by_text}"
    );
    assert!(!taken);
}

#[test]
fn tools_whose_types_are_not_exact_always_take_the_validated_path() {
    let desk = Desk::new();
    for (tool, text, succeeds) in [
        ("initial", r#"{"letter": "é", "name": "x"}"#, true),
        ("initial", r#"{"letter": "ab", "name": "x"}"#, false),
        ("bounded", r#"{"count": 5}"#, true),
        ("bounded", r#"{"count": 50}"#, false),
    ] {
        let (by_text, by_tree, taken) = desk.both(tool, text);
        assert_eq!(by_text, by_tree, "{text}");
        assert!(!taken, "{tool} read {text} without the validator");
        assert_eq!(
            by_text["status"] == "succeeded",
            succeeds,
            "{text}: {by_text}"
        );
    }
}

#[test]
fn text_that_is_not_one_json_object_is_malformed_as_it_is_read() {
    for (text, what) in [
        ("[1, 2]", "the arguments are not a JSON object"),
        ("\"text\"", "the arguments are not a JSON object"),
        ("{\"a\": 1} x", "the arguments are not valid JSON"),
        // Valid JSON, but beyond what a tree holds.
        (
            "{\"a\": 1e400}",
            "the arguments hold a value that cannot be read",
        ),
        (
            "{\"a\": \"\\ud800\"}",
            "the arguments hold a value that cannot be read",
        ),
        ("{\"a\": [1,}", "the arguments are not valid JSON"),
    ] {
        let call = ToolCall::from_json_text("c", "plain", text);
        let err = call.arguments.unwrap_err();
        assert_eq!(err.what, what, "{text}");
        // The tree reading agrees that the text is not an object.
        assert!(
            serde_json::from_str::<Value>(text).map_or(true, |value| !value.is_object()),
            "{text}"
        );
    }
}

#[test]
fn validation_comes_before_the_permission_on_the_text_path_too() {
    let desk = Desk::new();
    // Valid arguments, no permission: the run is aborted, and the tool never ran.
    let before = desk.taken();
    let aborted = desk
        .dispatch(
            &[],
            ToolCall::from_json_text("c", "plain", &valid().to_string()),
        )
        .unwrap_err();
    assert!(aborted.contains("lacks the permission `echo`"), "{aborted}");
    assert_eq!(desk.taken(), before + 1);
    // Invalid arguments, no permission: the model hears of the arguments first.
    let report = desk
        .dispatch(
            &[],
            ToolCall::from_json_text("c", "plain", r#"{"name": 1}"#),
        )
        .unwrap();
    assert_eq!(
        report.result.to_json()["error"]["kind"],
        "invalid_arguments"
    );
}
