//! The facade's integration tests, one binary: each module an area of the dispatcher, its
//! stores and its formats, as a user of `toolgate` meets them. `stores` opens the real stores
//! (a SQLite file, a PostgreSQL database of its own) and `json_args` generates the property
//! tests' arguments.
//!
//! Three binaries stand apart:
//! - `tests/compiletest.rs`, the compile-fail suite: trybuild builds its cases apart;
//! - `tests/dispatch_tracing.rs`, which installs a tracing subscriber for its thread: tracing
//!   caches process-wide whether a callsite is enabled, so a test thread without a subscriber
//!   that reaches a callsite first can leave it disabled for the tracing test too;
//! - `tests/crash_recovery.rs`, which kills processes of its own binary at each failpoint and
//!   checks what a restart finds. Run among this binary's other tests, it once found two
//!   expired leases where it expects one (seed 74, killed in its first call); that is not
//!   explained yet, so it runs alone, as it always had.

mod approvals;
mod cancellation;
mod catalog_schemas;
mod dispatch_batches;
mod dispatch_claims;
mod dispatch_faults;
mod dispatch_pipeline;
mod dispatch_wiring;
mod dispatch_writes;
mod hostile_turns;
mod json_args;
mod macro_forms;
mod one_pass_arguments;
mod outbox_dispatch;
mod outbox_lost_answers;
mod policy_results;
mod postgres_approval_processes;
mod postgres_dispatch;
mod postgres_outage;
mod postgres_outbox_workers;
mod postgres_round_trips;
mod provider_fixtures;
mod provider_roundtrip;
mod reconcile;
mod run_limits;
mod steps;
mod store_outage;
mod stores;
mod text_arguments;
mod unencodable_output;
mod validation_props;
