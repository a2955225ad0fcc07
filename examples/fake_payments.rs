//! The fake payment provider of the refund desk as a process of its own: refunds under an
//! `Idempotency-Key` header, lookups by key, `GET /ledger`, and faults armed over HTTP.
//!
//! ```sh
//! cargo run --example fake_payments -- --port 7070
//! cargo run --example refund_desk -- --provider-url http://127.0.0.1:7070
//! curl http://127.0.0.1:7070/ledger
//! ```
//!
//! The provider is the library's `toolgate_demo::fake_payments` (`src/fake_payments.rs`), whose
//! docs say what it prints and how it keeps its ledger; the tests run the same code as the
//! `fake_payments` binary.

fn main() -> std::process::ExitCode {
    toolgate_demo::fake_payments::main()
}
