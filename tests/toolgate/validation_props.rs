//! Property: for any JSON the model may send, validation either accepts and deserialization
//! succeeds, or it answers with structured errors whose pointers lead into the arguments. Never a
//! panic, never an acceptance followed by a deserialization failure.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate::prelude::*;

use crate::support::json_args;
use json_args::any_number;

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
enum Mode {
    Fast,
    Slow,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
enum Shape {
    Circle { r: f64 },
    Square(u16),
    Point,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Address {
    street: String,
    zip: Option<u32>,
    tags: Vec<String>,
}

/// Takes every kind of argument and echoes them.
#[tool]
async fn everything(
    name: String,
    count: u8,
    total: i64,
    big: u64,
    small: i16,
    ratio: f32,
    flag: bool,
    letter: char,
    mode: Mode,
    shape: Shape,
    address: Option<Address>,
    items: Vec<Address>,
    scores: HashMap<String, u32>,
) -> Result<Value, ToolError> {
    Ok(json!({
        "name": name, "count": count, "total": total, "big": big, "small": small, "ratio": ratio,
        "flag": flag, "letter": letter, "mode": mode, "shape": shape, "address": address,
        "items": items, "scores": scores,
    }))
}

const FIELDS: [&str; 13] = [
    "name", "count", "total", "big", "small", "ratio", "flag", "letter", "mode", "shape",
    "address", "items", "scores",
];

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any_number(),
        "[a-zA-Z]{0,3}".prop_map(Value::from),
        prop_oneof![
            Just("Fast"),
            Just("Slow"),
            Just("Point"),
            Just("x"),
            Just("é"),
            Just("")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(FIELDS.to_vec()).prop_map(str::to_owned),
        prop::sample::select(vec![
            "street", "zip", "tags", "r", "Circle", "Square", "Point"
        ])
        .prop_map(str::to_owned),
        "[a-z]{1,4}",
    ]
}

fn good_address() -> impl Strategy<Value = Value> {
    (
        "[a-z ]{0,8}",
        prop::option::of(any::<u32>()),
        prop::collection::vec("[a-z]{0,3}", 0..3),
    )
        .prop_map(|(street, zip, tags)| json!({"street": street, "zip": zip, "tags": tags}))
}

/// A plausible value for each field, right or wrong.
fn field_value(field: &'static str) -> BoxedStrategy<Value> {
    let good: BoxedStrategy<Value> = match field {
        "name" => "[a-z]{0,6}".prop_map(Value::from).boxed(),
        "count" => any::<u8>().prop_map(Value::from).boxed(),
        "total" => any::<i64>().prop_map(Value::from).boxed(),
        "big" => any::<u64>().prop_map(Value::from).boxed(),
        "small" => any::<i16>().prop_map(Value::from).boxed(),
        "ratio" => (-1e6f64..1e6).prop_map(Value::from).boxed(),
        "flag" => any::<bool>().prop_map(Value::from).boxed(),
        "letter" => any::<char>()
            .prop_map(|c| Value::from(c.to_string()))
            .boxed(),
        "mode" => prop_oneof![Just(json!("Fast")), Just(json!("Slow"))].boxed(),
        "shape" => prop_oneof![
            Just(json!("Point")),
            any::<u16>().prop_map(|n| json!({"Square": n})),
            (-10.0f64..10.0).prop_map(|r| json!({"Circle": {"r": r}})),
        ]
        .boxed(),
        "address" => prop::option::of(good_address())
            .prop_map(|a| a.unwrap_or(Value::Null))
            .boxed(),
        "items" => prop::collection::vec(good_address(), 0..3)
            .prop_map(Value::from)
            .boxed(),
        "scores" => prop::collection::hash_map("[a-z]{1,3}", any::<u32>(), 0..3)
            .prop_map(|m| json!(m))
            .boxed(),
        _ => unreachable!(),
    };
    prop_oneof![30 => good, 1 => any_json(), 1 => any_number()].boxed()
}

/// Objects that are mostly right: each field present or not, good or bad, plus stray fields.
fn near_valid_args() -> impl Strategy<Value = Value> {
    let stray = prop::collection::vec((key(), any_json()), 0..2);
    json_args::near_valid(&FIELDS, |_| 0.99, field_value, stray, 10)
}

fn deep(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| json!([inner]))
}

fn check(
    dispatcher: &Dispatcher,
    runtime: &tokio::runtime::Runtime,
    args: Value,
) -> Result<bool, TestCaseError> {
    // A run of its own for each check: the run's limits and repeat detection are not what this
    // property is about.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let session = Session::new(AuthContext::new("t", "u"), format!("r{run}"));
    let call = ToolCall::new("c", "everything", args.clone());
    let report = runtime
        .block_on(dispatcher.dispatch(&session, call))
        .unwrap();
    let result = report.result.to_json();
    match report.result.status {
        Status::Succeeded => Ok(true),
        Status::Error => {
            let error = &result["error"];
            prop_assert_eq!(&error["kind"], "invalid_arguments", "{}", result);
            let what = error["what"].as_str().unwrap();
            prop_assert!(
                what.starts_with("the arguments of everything break its schema"),
                "accepted by the schema but not by serde: {} for {}",
                result,
                args
            );
            // Every listed pointer leads into the arguments.
            let registered = dispatcher.registry().get("everything").unwrap();
            let violations = registered.validator().violations(&args);
            prop_assert!(!violations.is_empty());
            for violation in violations {
                prop_assert!(
                    args.pointer(&violation.pointer).is_some(),
                    "{} not in {}",
                    violation.pointer,
                    args
                );
            }
            Ok(false)
        }
        other => Err(TestCaseError::fail(format!(
            "unexpected status {other:?}: {result}"
        ))),
    }
}

fn setup() -> (Dispatcher, tokio::runtime::Runtime) {
    let mut registry = Registry::new();
    registry.register::<everything>().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    (
        Dispatcher::builder(registry)
            .store(toolgate_test::MemoryStore::new())
            .build(),
        runtime,
    )
}

fn config() -> Config {
    Config {
        cases: 2_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn near_valid_arguments_are_accepted_whole_or_rejected_with_pointers(args in near_valid_args()) {
        let (dispatcher, runtime) = setup();
        check(&dispatcher, &runtime, args)?;
    }

    #[test]
    fn arbitrary_json_is_accepted_whole_or_rejected_with_pointers(args in any_json()) {
        let (dispatcher, runtime) = setup();
        check(&dispatcher, &runtime, args)?;
    }
}

#[test]
fn both_outcomes_are_exercised() {
    // The generator must reach acceptance as well as rejection, or the property says little.
    let (dispatcher, runtime) = setup();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..500 {
        let args = near_valid_args().new_tree(&mut runner).unwrap().current();
        if check(&dispatcher, &runtime, args).unwrap() {
            accepted += 1;
        } else {
            rejected += 1;
        }
    }
    assert!(
        accepted > 50 && rejected > 50,
        "accepted {accepted}, rejected {rejected}"
    );
}

#[test]
fn edge_values() {
    let (dispatcher, runtime) = setup();
    let base = json!({
        "name": "n", "count": 1, "total": 1, "big": 1, "small": 1, "ratio": 1.0, "flag": true,
        "letter": "x", "mode": "Fast", "shape": "Point", "address": null, "items": [], "scores": {}
    });
    let with = |field: &str, value: Value| {
        let mut args = base.clone();
        args[field] = value;
        args
    };
    let cases = [
        (with("count", json!(255.0)), true),
        (with("count", json!(256)), false),
        (with("big", json!(18446744073709551615u64)), true),
        (with("big", json!(1.8446744073709552e19)), false),
        (with("total", json!(-9223372036854775808i64)), true),
        (with("total", json!(1e19)), false),
        (with("small", json!(-32769)), false),
        (with("letter", json!("xy")), false),
        (with("letter", json!("é")), true),
        // An f32 holds numbers up to f32::MAX: the schema's bounds say so.
        (with("ratio", json!(3.4028234663852886e38)), true),
        (with("ratio", json!(1e300)), false),
        (with("shape", json!({"Square": 70000})), false),
        (
            with("shape", json!({"Circle": {"r": 1, "extra": 2}})),
            false,
        ),
        (
            with("address", json!({"street": "s", "tags": [], "zip": null})),
            true,
        ),
        (
            with("address", json!({"street": "s", "tags": [], "other": 1})),
            false,
        ),
        (with("items", deep(100)), false),
        (with("scores", json!({"a": -1})), false),
        (base.clone(), true),
    ];
    for (args, expected) in cases {
        assert_eq!(
            check(&dispatcher, &runtime, args.clone()).unwrap(),
            expected,
            "{args}"
        );
    }
}
