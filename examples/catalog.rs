//! Prints the demo shop's tools as the model sees them, in one provider's format.
//!
//! ```sh
//! cargo run --example catalog -- --format openai-strict
//! ```
//!
//! `--format` is one of `openai`, `openai-strict`, `openai-responses`, `anthropic`,
//! `anthropic-strict`, `gemini` or `mcp` (default `openai`). The output is one JSON array on
//! stdout.

use std::process::ExitCode;

use toolgate::provider::{FORMAT_NAMES, format_by_name};
use toolgate_demo::shop;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut format = String::from("openai");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--format" => match args.next() {
                Some(value) => format = value,
                None => return usage("--format needs a value"),
            },
            other => match other.strip_prefix("--format=") {
                Some(value) => format = value.to_owned(),
                None => return usage(&format!("unknown argument `{other}`")),
            },
        }
    }
    let Some(wire) = format_by_name(&format) else {
        return usage(&format!("unknown format `{format}`"));
    };
    let catalog = wire.catalog(&shop::registry());
    let text = serde_json::to_string_pretty(&catalog).expect("a catalog is JSON");
    println!("{text}");
    ExitCode::SUCCESS
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("catalog: {problem}");
    eprintln!(
        "usage: cargo run --example catalog -- --format <{}>",
        FORMAT_NAMES.join("|")
    );
    ExitCode::from(2)
}
