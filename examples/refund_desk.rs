//! The refund desk: an agent's tool calls against a payment provider that misbehaves, made safe.
//!
//! ```sh
//! cargo run --example refund_desk
//! cargo run --example refund_desk -- --script examples/scenarios/bad-arguments.jsonl
//! cargo run --example refund_desk -- --help
//! ```
//!
//! With no flags the desk tells its seed story on stdout: a refund whose provider answer times
//! out after it was applied, asked again by the model, settled by the reconciler, and refunded
//! exactly once in the provider's ledger. `--script FILE` replays any story written as JSON Lines
//! (`examples/scenarios/README.md`). The desk is the library's `toolgate_demo::refund_desk`
//! (`src/refund_desk.rs`), whose docs list every flag; the tests run the same code as the
//! `refund_desk` binary.

fn main() -> std::process::ExitCode {
    toolgate_demo::refund_desk::main()
}
