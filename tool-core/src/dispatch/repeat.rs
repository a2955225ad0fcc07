//! Repeat detection: the same tool with the same canonical arguments, after that call failed in
//! this run, is answered `repeated_call` without running.
//!
//! A failure counts when repeating the call would fail the same way: invalid arguments, not
//! found, a conflict, a business rule's refusal, an internal fault. A failure whose cause can
//! change by itself is not a repeat: a service that was unavailable (its retries spent), a
//! timeout, a rate limit, a duplicate in progress, an unknown outcome (a repeat of a write is
//! answered from its record anyway), an approval pending, a run budget. A call that keeps
//! failing for such a cause is stopped by the run's retry budget instead.

use crate::call::Arguments;
use crate::error::ErrorKind;
use crate::hash_secret::HashSecret;
use crate::idempotency::{canonical_json, request_hash};
use crate::schema::normalize_numbers;

/// Whether a call that failed with `kind` counts for repeat detection.
pub(super) const fn counts(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidArguments
            | ErrorKind::NotFound
            | ErrorKind::Conflict
            | ErrorKind::Refused
            | ErrorKind::Internal
    )
}

/// The fingerprint of a call of `tool` with `arguments`: the request hash, keyed with `secret`,
/// of its canonical arguments (numbers normalized as validation does), whichever way they
/// arrived; the same hash a write's record holds.
pub(super) fn fingerprint(secret: &HashSecret, tool: &str, arguments: &Arguments) -> String {
    let mut value = arguments.to_value();
    normalize_numbers(&mut value);
    request_hash(secret, tool, &canonical_json(&value))
}
