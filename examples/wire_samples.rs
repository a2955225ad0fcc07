//! Prints the wire samples ([`toolgate_demo::wire_samples`]) in every provider format: the sample
//! tools as each format declares them, and the sample results as each format renders them.
//!
//! ```sh
//! cargo run --example wire_samples
//! ```
//!
//! The output is one JSON object on stdout: `{"formats": [name, …], "catalogs": {format:
//! catalog}, "results": {format: {case: rendered}}}`, a format for each of
//! [`FORMAT_NAMES`](toolgate::provider::FORMAT_NAMES), a case for each of
//! [`result_cases`](toolgate_demo::wire_samples::result_cases).
//! `scripts/provider-fixtures/record.py` runs it and feeds what it prints to the providers'
//! client libraries.

use std::process::ExitCode;

use serde_json::{Map, Value, json};
use toolgate::provider::{FORMAT_NAMES, format_by_name};
use toolgate_demo::wire_samples::{registry, result_cases};

fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        eprintln!("wire_samples: unknown argument `{arg}`; it takes none");
        eprintln!("usage: cargo run --example wire_samples");
        return ExitCode::from(2);
    }
    let registry = registry();
    let cases = result_cases();
    let mut catalogs = Map::new();
    let mut results = Map::new();
    for name in FORMAT_NAMES {
        let format = format_by_name(name).expect("every name in FORMAT_NAMES has a format");
        catalogs.insert(name.into(), Value::from(format.catalog(&registry)));
        let rendered = cases
            .iter()
            .map(|(case, reports)| {
                let rendered = format.render_results(reports);
                (
                    (*case).to_owned(),
                    rendered.expect("every case has reports"),
                )
            })
            .collect::<Map<_, _>>();
        results.insert(name.into(), Value::Object(rendered));
    }
    let samples = json!({"formats": FORMAT_NAMES, "catalogs": catalogs, "results": results});
    let text = serde_json::to_string_pretty(&samples).expect("the samples are JSON");
    println!("{text}");
    ExitCode::SUCCESS
}
