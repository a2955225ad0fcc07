//! toolgate-test's integration tests, one binary: a module an area of the kit.
//!
//! - `memory_conformance`: the conformance suite on the memory store;
//! - `chaos` (feature `chaos`): the fault proxy in front of a provider on loopback, and the
//!   fault hook, alone and under a dispatcher.
//!
//! `tests/recording_failpoints.rs` stands apart: it drives a real dispatcher through the facade.

#[cfg(feature = "chaos")]
mod chaos;
mod memory_conformance;
