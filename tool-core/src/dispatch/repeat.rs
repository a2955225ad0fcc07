//! Repeat detection: the same tool with the same canonical arguments, after that call failed in
//! this run, is answered `repeated_call` without running.
//!
//! Which failures count is one rule, [`ErrorKind::fails_again`](crate::ErrorKind::fails_again):
//! what the same call would meet again (invalid arguments, not found, a conflict, a business
//! rule's refusal). A failure of the infrastructure never counts (a store or provider that could
//! not be reached, a timeout, a rate limit, an internal fault), nor does a state that changes by
//! itself; a call that keeps failing for such a cause is stopped by the run's retry budget.

use crate::call::Arguments;
use crate::hash_secret::HashSecret;
use crate::idempotency::{canonical_json, request_hash};
use crate::schema::normalize_numbers;

/// The fingerprint of a call of `tool` with `arguments`: the request hash, keyed with `secret`,
/// of its canonical arguments (numbers normalized as validation does), whichever way they
/// arrived; the same hash a write's record holds.
pub(super) fn fingerprint(secret: &HashSecret, tool: &str, arguments: &Arguments) -> String {
    let mut value = arguments.to_value();
    normalize_numbers(&mut value);
    request_hash(secret, tool, &canonical_json(&value))
}
