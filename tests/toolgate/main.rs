//! The facade's integration tests, one binary: each module an area of the dispatcher, its
//! stores and its formats, as a user of `toolgate` meets them. `support` holds what they share:
//! the usual session, the real stores (a SQLite file, a PostgreSQL database of its own) and the
//! property tests' arguments.
//!
//! The compile-fail suite, `tests/compiletest.rs`, stands apart: trybuild builds its cases.

mod approvals;
mod cancellation;
mod catalog_schemas;
mod crash_recovery;
mod dispatch_batches;
mod dispatch_claims;
mod dispatch_faults;
mod dispatch_pipeline;
mod dispatch_tracing;
mod dispatch_wiring;
mod dispatch_writes;
mod hostile_turns;
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
mod support;
mod text_arguments;
mod unencodable_output;
mod validation_props;
