//! toolgate-test's integration tests, one binary: a module an area of the kit.
//!
//! - `memory_conformance`: the conformance suite on the memory store.
//!
//! `tests/recording_failpoints.rs` stands apart: it drives a real dispatcher through the facade.

mod memory_conformance;
