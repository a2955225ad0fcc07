//! The wire formats held to the official OpenAI, Anthropic and Google client libraries, through
//! the fixtures in `tests/fixtures/providers/` that `scripts/provider-fixtures/record.py`
//! recorded from them (it says how to refresh them). No Python and no network here: the fixtures
//! are committed.
//!
//! - `produced.json`: model turns as each library produces them, dumped the ways applications
//!   do (with nulls, without, snake_case, camelCase). Every dump of a turn parses to the calls
//!   the library's typed objects hold, and the rendered answer answers exactly those calls (a
//!   turn without calls: nothing to send).
//! - `accepted.json`: toolgate's catalogs and results for the wire samples
//!   (`toolgate_demo::wire_samples`), each with the library's verdict. Today's renders must equal
//!   the recorded ones (a render the library never saw fails and asks to re-record), and every
//!   verdict must be "accepted": validated, and kept value for value by the library's own dump.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::{FORMAT_NAMES, Gemini, WireFormat, format_by_name};
use toolgate::tool::JsonText;
use toolgate_demo::wire_samples;

/// How to record the fixtures again.
const REFRESH: &str = "python3 scripts/provider-fixtures/record.py";

/// The key record.py injects to prove that a library's validation rejects keys its types lack.
const UNKNOWN_KEY: &str = "toolgate_unknown_key";

/// The cases every provider's `produced.json` has.
const CASES: [&str; 4] = ["one-call", "parallel-calls", "text-and-calls", "no-calls"];

/// The provider whose client library records a format's fixtures, or `None` for a format no
/// official Python client library speaks (MCP).
fn provider_of(format: &str) -> Option<&'static str> {
    match format {
        "openai" | "openai-strict" | "openai-responses" => Some("openai"),
        "anthropic" | "anthropic-strict" => Some("anthropic"),
        "gemini" => Some("gemini"),
        _ => None,
    }
}

fn fixture(provider: &str, kind: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers")
        .join(provider)
        .join(format!("{kind}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{}: {err}; record it with `{REFRESH}`", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn format(name: &str) -> Result<Box<dyn WireFormat>, String> {
    format_by_name(name).ok_or_else(|| {
        format!("toolgate has no format `{name}`, which the fixtures hold a recording for")
    })
}

fn entries<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key]
        .as_array()
        .unwrap_or_else(|| panic!("the fixture has no array `{key}`; record it with `{REFRESH}`"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("the fixture entry has no string `{key}`: {value}"))
}

/// Fails with every problem found, one a line, after the check saw them all.
fn assert_none(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

// What the libraries produce --------------------------------------------------------------------

/// The calls of a turn as the fixtures write them: `{"id", "name", "arguments"}` each, the id
/// null for a call that came without one (toolgate gives it [`Gemini::generated_id`]), the
/// arguments of a malformed call replaced by what is wrong with them.
fn reading(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let id = if call.id == Gemini::generated_id(index) {
                Value::Null
            } else {
                Value::from(call.id.as_str())
            };
            let arguments = match &call.arguments {
                Ok(arguments) => arguments.to_value(),
                Err(bad) => json!({"malformed": bad.what, "why": bad.why}),
            };
            json!({"id": id, "name": call.name, "arguments": arguments})
        })
        .collect()
}

/// The call ids a rendered answer answers, in order (`None`: a Gemini response without an id,
/// for a call that came without one).
fn answered_ids(format: &str, rendered: &Value) -> Vec<Option<String>> {
    let id = |value: &Value| value.as_str().map(str::to_owned);
    let items = |value: &Value| value.as_array().cloned().unwrap_or_default();
    match format {
        "openai" | "openai-strict" => items(rendered)
            .iter()
            .map(|m| id(&m["tool_call_id"]))
            .collect(),
        "openai-responses" => items(rendered).iter().map(|i| id(&i["call_id"])).collect(),
        "anthropic" | "anthropic-strict" => items(&rendered["content"])
            .iter()
            .map(|block| id(&block["tool_use_id"]))
            .collect(),
        "gemini" => items(&rendered["parts"])
            .iter()
            .map(|part| id(&part["functionResponse"]["id"]))
            .collect(),
        other => panic!("no reading of the answers of {other}"),
    }
}

/// What `format` sends back for `reports`, checked to be the same as a tree and as text; `None`
/// when the format sends nothing. The one place that reads the result renderings.
fn rendered(format: &dyn WireFormat, reports: &[CallReport]) -> Result<Option<Value>, String> {
    let tree = format.render_results(reports);
    let from_text = match format.render_results_text(reports) {
        Some(text) => Some(
            serde_json::from_str::<Value>(&text)
                .map_err(|err| format!("render_results_text is not JSON: {err}: {text}"))?,
        ),
        None => None,
    };
    if from_text != tree {
        return Err(format!(
            "render_results_text gives {from_text:?}, render_results {tree:?}"
        ));
    }
    Ok(tree)
}

/// The answer to `calls` in `format`, each call answered with the same success.
fn answer(format: &dyn WireFormat, calls: &[ToolCall]) -> Result<Option<Value>, String> {
    let data = JsonText::of(&json!({"ok": true})).unwrap();
    let reports = calls
        .iter()
        .map(|call| CallReport {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            result: CallResult::succeeded(data.clone()),
        })
        .collect::<Vec<_>>();
    rendered(format, &reports)
}

/// Every dump of every case in `provider`'s `produced.json`: read as a tree and as text, it
/// holds the calls the library's objects hold; the answer answers exactly those.
fn check_produced(provider: &str) {
    let fixture = fixture(provider, "produced");
    let formats = fixture["formats"]
        .as_object()
        .expect("`formats` is an object");
    let mut problems = Vec::new();
    for (name, cases) in formats {
        let format = match format(name) {
            Ok(format) => format,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let cases = cases.as_array().expect("a format's cases are an array");
        let recorded: BTreeSet<&str> = cases.iter().map(|case| text(case, "case")).collect();
        for case in CASES.iter().filter(|case| !recorded.contains(*case)) {
            problems.push(format!(
                "{name}: no case `{case}`; record it with `{REFRESH}`"
            ));
        }
        for case in cases {
            let expected = &case["expect"];
            let dumps = case["dumps"].as_object().expect("`dumps` is an object");
            for (dump, turn) in dumps {
                let at = format!("{name} {} {dump}", text(case, "case"));
                check_turn(&*format, &at, turn, expected, &mut problems);
            }
        }
    }
    assert_none(problems);
}

fn check_turn(
    format: &dyn WireFormat,
    at: &str,
    turn: &Value,
    expected: &Value,
    problems: &mut Vec<String>,
) {
    let calls = match format.parse_calls(turn) {
        Ok(calls) => calls,
        Err(err) => {
            problems.push(format!("{at}: {err}"));
            return;
        }
    };
    let read = reading(&calls);
    if &read != expected {
        problems.push(format!("{at}: read {read}, expected {expected}"));
    }
    match format.parse_calls_text(&turn.to_string()) {
        Ok(from_text) if from_text == calls => {}
        Ok(from_text) => problems.push(format!(
            "{at}: read from text {from_text:?}, from the tree {calls:?}"
        )),
        Err(err) => problems.push(format!("{at}: as text: {err}")),
    }
    let asked: Vec<Option<String>> = expected
        .as_array()
        .expect("`expect` is an array")
        .iter()
        .map(|call| call["id"].as_str().map(str::to_owned))
        .collect();
    let answered = match answer(format, &calls) {
        Ok(None) => Vec::new(),
        Ok(Some(rendered)) if asked.is_empty() => {
            problems.push(format!(
                "{at}: a turn without calls is answered with {rendered}, not with nothing"
            ));
            return;
        }
        Ok(Some(rendered)) => answered_ids(format.name(), &rendered),
        Err(problem) => {
            problems.push(format!("{at}: {problem}"));
            return;
        }
    };
    if answered != asked {
        problems.push(format!(
            "{at}: the answer answers {answered:?}, the turn asked {asked:?}"
        ));
    }
}

#[test]
fn openai_turns_from_the_library_parse_to_their_calls() {
    check_produced("openai");
}

#[test]
fn anthropic_turns_from_the_library_parse_to_their_calls() {
    check_produced("anthropic");
}

#[test]
fn gemini_turns_from_the_library_parse_to_their_calls() {
    check_produced("gemini");
}

// What the libraries accept ---------------------------------------------------------------------

/// Today's render of a recorded entry: the catalog of the wire samples, or their results for the
/// entry's case.
fn render_now(format: &dyn WireFormat, entry: &Value) -> Result<Value, String> {
    let Some(case) = entry.get("case") else {
        return Ok(Value::from(format.catalog(&wire_samples::registry())));
    };
    let case = case.as_str().unwrap_or_default();
    let reports = wire_samples::result_case(case)
        .ok_or_else(|| format!("the wire samples have no result case `{case}` any more"))?;
    rendered(format, &reports)?.ok_or_else(|| format!("the results `{case}` render nothing"))
}

/// What is wrong with one recorded entry today, if anything: toolgate renders something else
/// now (record again), the recording is not of toolgate's render, or the library did not accept
/// it.
fn check_entry(entry: &Value) -> Option<String> {
    let name = text(entry, "format");
    let at = match entry.get("case") {
        Some(case) => format!("{name} results `{}`", case.as_str().unwrap_or_default()),
        None => format!("{name} catalog"),
    };
    let now = match format(name).and_then(|format| render_now(&*format, entry)) {
        Ok(now) => now,
        Err(problem) => return Some(format!("{at}: {problem}")),
    };
    if now != entry["render"] {
        return Some(format!(
            "{at}: toolgate renders what the library never saw; record it again with `{REFRESH}` \
             and review the verdict.\nnow:      {now}\nrecorded: {}",
            entry["render"]
        ));
    }
    let source = text(entry, "render_source");
    if source != "toolgate" {
        return Some(format!(
            "{at}: the library saw a {source}, not toolgate's render; record it with `{REFRESH}`"
        ));
    }
    let verdict = text(entry, "verdict");
    (verdict != "accepted").then(|| {
        let detail = entry.get("errors").or(entry.get("differences"));
        format!(
            "{at}: the library's verdict was {verdict}: {}",
            detail.unwrap_or(&Value::Null)
        )
    })
}

/// The strictness proofs of `provider`'s `accepted.json`, and its recorded entries for the
/// formats in `formats`.
fn check_accepted(provider: &str, formats: &[&str]) {
    let fixture = fixture(provider, "accepted");
    let mut problems = Vec::new();
    let proofs = entries(&fixture, "strictness_proofs");
    assert!(!proofs.is_empty(), "{provider}: no strictness proofs");
    for proof in proofs {
        let injected = text(proof, "injected_at");
        let named = entries(proof, "errors").iter().any(|err| {
            err["type"] == "extra_forbidden"
                && err["at"]
                    .as_str()
                    .is_some_and(|at| at.ends_with(&format!("/{UNKNOWN_KEY}")))
        });
        if proof["verdict"] != "rejected" || !named {
            problems.push(format!(
                "{provider}: the validation with {} did not reject the unknown key at {injected}: {proof}",
                text(proof, "library_type")
            ));
        }
    }
    for entry in entries(&fixture, "catalogs")
        .iter()
        .chain(entries(&fixture, "results"))
        .filter(|entry| formats.contains(&text(entry, "format")))
    {
        problems.extend(check_entry(entry));
    }
    assert_none(problems);
}

#[test]
fn openai_renders_are_what_the_library_accepted() {
    check_accepted("openai", &["openai", "openai-strict", "openai-responses"]);
}

#[test]
fn anthropic_renders_are_what_the_library_accepted() {
    check_accepted("anthropic", &["anthropic"]);
}

#[test]
fn anthropic_strict_catalog_is_what_the_library_accepted() {
    check_accepted("anthropic", &["anthropic-strict"]);
}

#[test]
fn gemini_renders_are_what_the_library_accepted() {
    check_accepted("gemini", &["gemini"]);
}

/// Every format a client library speaks has its catalog and every result case recorded, so a new
/// format or case cannot go unchecked.
#[test]
fn every_format_of_a_client_library_is_recorded() {
    let cases: Vec<&str> = wire_samples::result_cases()
        .iter()
        .map(|(case, _)| *case)
        .collect();
    let mut problems = Vec::new();
    for name in FORMAT_NAMES {
        let Some(provider) = provider_of(name) else {
            continue;
        };
        let fixture = fixture(provider, "accepted");
        let of_format = |key: &str| -> Vec<Value> {
            entries(&fixture, key)
                .iter()
                .filter(|entry| entry["format"] == name)
                .cloned()
                .collect()
        };
        if of_format("catalogs").is_empty() {
            problems.push(format!(
                "{name}: no catalog recorded; record it with `{REFRESH}`"
            ));
        }
        let results = of_format("results");
        for case in &cases {
            if !results.iter().any(|entry| entry["case"] == *case) {
                problems.push(format!(
                    "{name}: no results `{case}` recorded; record them with `{REFRESH}`"
                ));
            }
        }
    }
    assert_none(problems);
}
