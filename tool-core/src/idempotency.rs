//! Keys and request hashes: derived by the runtime from the call, never invented by the model.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::descriptor::{KeyScope, ToolDescriptor};
use crate::hash_secret::hex;

pub use crate::hash_secret::{HASH_SECRET_ENV, HASH_SECRET_FILE_ENV, HashSecret, HashSecretError};
pub use crate::key::IdempotencyKey;

/// The canonical JSON text of `value`: object keys sorted, no whitespace. Key order and spacing
/// in what the model sent do not change it. Numbers are as `serde_json` writes them (after the
/// dispatcher has turned integral floats into integers, `5.0` and `5` are one number).
///
/// ```
/// use serde_json::json;
/// use toolgate::idempotency::canonical_json;
///
/// assert_eq!(
///     canonical_json(&json!({"b": [2, {"d": 1, "c": null}], "a": "x"})),
///     r#"{"a":"x","b":[2,{"c":null,"d":1}]}"#
/// );
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn hex_sha256(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        // Length-prefixed, so that no two different part lists hash the same bytes.
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

/// What starts a request hash of version 2, keyed with the application's [`HashSecret`]. A
/// hash without it is of version 1: unkeyed, written before hashes were keyed.
pub const REQUEST_HASH_V2: &str = "v2:";

/// The hash of a request: `v2:` and the HMAC-SHA-256, keyed with `secret`, of the tool's name
/// and the canonical JSON of all its arguments. Same key with another hash is a conflict.
/// Without the secret, nobody can tell which arguments a hash was made of by hashing guesses.
///
/// ```
/// use toolgate::idempotency::HashSecret;
/// use toolgate::idempotency::request_hash;
///
/// let secret = HashSecret::new("a secret of at least thirty-two bytes, kept out of the store")
///     .unwrap();
/// let hash = request_hash(&secret, "issue_refund", r#"{"amount":5,"order_id":"ORD-1"}"#);
/// assert!(hash.starts_with("v2:") && hash.len() == 67);
/// ```
pub fn request_hash(secret: &HashSecret, tool: &str, canonical_arguments: &str) -> String {
    let mut hash = String::with_capacity(REQUEST_HASH_V2.len() + 64);
    hash.push_str(REQUEST_HASH_V2);
    hash.push_str(&secret.hex_hmac(&["request", tool, canonical_arguments]));
    hash
}

/// A request as its version-1 hash saw it: the tool and its canonical arguments, for a claim
/// to recognise a record stored before hashes were keyed, under the unkeyed SHA-256 of the
/// same parts. The hash is computed only when such a record is met, so a claim costs nothing
/// more otherwise. Its `Debug` never shows the arguments.
#[derive(Clone, Copy)]
pub struct UnkeyedRequest<'a> {
    tool: &'a str,
    canonical_arguments: &'a str,
}

impl<'a> UnkeyedRequest<'a> {
    /// The request of `tool` with `canonical_arguments` (every argument, none redacted).
    pub fn new(tool: &'a str, canonical_arguments: &'a str) -> Self {
        UnkeyedRequest {
            tool,
            canonical_arguments,
        }
    }

    /// This request's version-1 hash, as toolgate stored it before hashes were keyed: the
    /// unkeyed SHA-256 of the tool and the arguments, 64 hex digits. For tests that write a
    /// record as an earlier version did.
    pub fn hash(&self) -> String {
        hex_sha256(&["request", self.tool, self.canonical_arguments])
    }

    /// Whether `stored`, a request hash of version 1 (64 hex digits, no `v2:`), is this
    /// request's. Always `false` for a hash of version 2.
    pub fn matches(&self, stored: &str) -> bool {
        stored.len() == 64 && !stored.starts_with(REQUEST_HASH_V2) && self.hash() == stored
    }
}

impl std::fmt::Debug for UnkeyedRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnkeyedRequest")
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

/// The hash of a tool's policy: its declared name, side effect, permission, approval threshold,
/// key fields and scope, and its canonical argument schema. An approval is bound to it: when the
/// tool or its threshold changes, an approval asked under the old policy is rejected before it
/// runs.
pub fn policy_hash(descriptor: &ToolDescriptor, schema: &Value) -> String {
    let policy = format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}",
        descriptor.side_effect,
        descriptor.permission,
        descriptor.approval,
        descriptor.key,
        descriptor.key_scope
    );
    hex_sha256(&["policy", descriptor.name, &policy, &canonical_json(schema)])
}

/// The id of the approval an operation asks for: `apr_` and 24 hex digits of a hash of the
/// tenant, the key, the call and the time it asked. None of them is an argument's value (a key
/// never covers a `#[sensitive]` argument), so the id tells nothing about the arguments.
pub fn approval_id(tenant: &str, key: &str, call_id: &str, now_ms: i64) -> String {
    let hash = hex_sha256(&["approval", tenant, key, call_id, &now_ms.to_string()]);
    format!("apr_{}", &hash[..24])
}

/// The idempotency key of a call: a hash of the tenant, the scope (the run id, or the tenant
/// for `key_scope = "tenant"`), the tool's name and the canonical JSON of its key fields (all
/// arguments when the tool names none; a missing optional field counts as `null`). Stable
/// across retries, takeovers and restarts; handed to the provider as it is. It is not keyed
/// with the [`HashSecret`]: a key never covers a `#[sensitive]` argument (the macro and
/// [`Registry::register`](crate::Registry::register) refuse such a tool), so guessing it
/// recovers nothing that is not printed beside it.
pub fn operation_key(
    descriptor: &ToolDescriptor,
    tenant: &str,
    run_id: &str,
    args: &Value,
) -> String {
    let scope = match descriptor.key_scope {
        KeyScope::Run => run_id,
        KeyScope::Tenant => "",
    };
    let fields = if descriptor.key.is_empty() {
        canonical_json(args)
    } else {
        let selected: serde_json::Map<String, Value> = descriptor
            .key
            .iter()
            .map(|field| {
                (
                    (*field).to_owned(),
                    args.get(*field).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        canonical_json(&Value::Object(selected))
    };
    let scope_kind = match descriptor.key_scope {
        KeyScope::Run => "run",
        KeyScope::Tenant => "tenant",
    };
    format!(
        "tg_{}",
        &hex_sha256(&["key", tenant, scope_kind, scope, descriptor.name, &fields])[..40]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SideEffect;
    use serde_json::json;

    static REFUND: ToolDescriptor = ToolDescriptor::new("issue_refund", "")
        .with_side_effect(SideEffect::Write)
        .with_key(&["order_id"])
        .with_key_scope(KeyScope::Run);

    #[test]
    fn key_order_and_spacing_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"order_id": "ORD-1", "amount": 5}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "amount":5,"order_id":"ORD-1" }"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        let secret = HashSecret::local_default();
        assert_eq!(
            request_hash(&secret, "issue_refund", &canonical_json(&a)),
            request_hash(&secret, "issue_refund", &canonical_json(&b))
        );
    }

    #[test]
    fn the_request_hash_is_keyed_and_versioned() {
        let secret = HashSecret::new("k".repeat(32)).unwrap();
        let other = HashSecret::new("j".repeat(32)).unwrap();
        let args = r#"{"amount":5,"order_id":"ORD-1"}"#;
        let hash = request_hash(&secret, "issue_refund", args);
        let unkeyed = hex_sha256(&["request", "issue_refund", args]);
        assert_eq!(hash.len(), 67);
        assert!(hash.starts_with(REQUEST_HASH_V2), "{hash}");
        assert!(!hash.contains(&unkeyed), "not the unkeyed hash");
        assert_ne!(hash, request_hash(&other, "issue_refund", args));
        assert_ne!(
            hash,
            request_hash(&secret, "issue_refund", r#"{"amount":6}"#)
        );
        assert_ne!(hash, request_hash(&secret, "refund", args));
    }

    /// A version-1 hash matches its own request only; a version-2 hash never matches as one.
    #[test]
    fn an_unkeyed_request_matches_only_its_own_version_1_hash() {
        let args = r#"{"amount":5,"order_id":"ORD-1"}"#;
        let request = UnkeyedRequest::new("issue_refund", args);
        let v1 = hex_sha256(&["request", "issue_refund", args]);
        let keyed = request_hash(&HashSecret::local_default(), "issue_refund", args);
        for (stored, expected) in [
            (v1.as_str(), true),
            (
                &hex_sha256(&["request", "issue_refund", r#"{"amount":6}"#]),
                false,
            ),
            (&hex_sha256(&["request", "refund", args]), false),
            (&keyed, false),
            (&v1[..63], false),
            ("h1", false),
        ] {
            assert_eq!(request.matches(stored), expected, "{stored}");
        }
        assert!(!format!("{request:?}").contains("ORD-1"), "{request:?}");
    }

    /// A claim meets a record stored under the version-1 hash of its own arguments as it meets
    /// one stored under its own hash, and one of other arguments as another request, in every
    /// state: a replay stays a replay, a conflict a conflict, a rejection a rejection.
    #[test]
    fn a_version_1_record_is_claimed_as_one_of_the_same_request() {
        use crate::store::{
            ApprovalRecord, ApprovalStatus, ClaimRequest, Journal, OperationRecord, OperationState,
            Requester,
        };
        const NOW: i64 = 1_000_000;
        let args = r#"{"amount":5,"order_id":"ORD-1"}"#;
        let v1 = hex_sha256(&["request", "issue_refund", args]);
        let keyed = request_hash(&HashSecret::local_default(), "issue_refund", args);
        let claim = |hash, unkeyed| ClaimRequest {
            tenant: "acme",
            key: "k",
            tool: "issue_refund",
            request_hash: hash,
            unkeyed,
            arguments: args,
            now_ms: NOW,
            lease: std::time::Duration::from_secs(30),
            takeover: false,
            approval: None,
        };
        let same = claim(&keyed, Some(UnkeyedRequest::new("issue_refund", args)));
        let other = claim(&keyed, Some(UnkeyedRequest::new("issue_refund", "{}")));
        let rejection = ApprovalRecord {
            id: "apr_1".into(),
            tenant: "acme".into(),
            key: "k".into(),
            tool: "issue_refund".into(),
            request_hash: v1.clone(),
            policy_hash: "p".into(),
            arguments: args.into(),
            amount: "5".into(),
            threshold: "1".into(),
            requester: Requester {
                user: "agent".into(),
                permissions: Vec::new(),
            },
            run_id: "r".into(),
            call_id: "c".into(),
            approver_permission: "refund:approve".into(),
            created_ms: 0,
            expires_ms: NOW + 1,
            status: ApprovalStatus::Rejected,
            decisions: Vec::new(),
        };
        for state in OperationState::ALL {
            for lease_until_ms in [0, NOW + 1] {
                for approval in [None, Some(&rejection)] {
                    let record = OperationRecord {
                        tenant: "acme".into(),
                        key: "k".into(),
                        tool: "issue_refund".into(),
                        request_hash: v1.clone(),
                        arguments: args.into(),
                        state,
                        attempt: 1,
                        lease_until_ms,
                        result: None,
                        errors: Vec::new(),
                        reconcile_tries: 0,
                        created_ms: 0,
                        updated_ms: 0,
                        approval_id: approval.map(|a| a.id.clone()),
                    };
                    let step = |c: &ClaimRequest<'_>| c.step(&record, approval, Journal::Empty);
                    assert_eq!(step(&same), step(&claim(&v1, None)), "{state:?}");
                    assert_eq!(step(&other), step(&claim("v2:other", None)), "{state:?}");
                }
            }
        }
        assert!(same.same_request(&v1) && same.same_request(&keyed));
        assert!(!other.same_request(&v1) && !claim(&keyed, None).same_request(&v1));
    }

    #[test]
    fn the_key_covers_only_the_key_fields_within_the_scope() {
        let key = |tenant, run, args: Value| operation_key(&REFUND, tenant, run, &args);
        let base = key("acme", "r1", json!({"order_id": "ORD-1", "amount": 5}));
        assert!(base.starts_with("tg_") && base.len() == 43, "{base}");
        assert_eq!(
            base,
            key("acme", "r1", json!({"amount": 9, "order_id": "ORD-1"}))
        );
        assert_ne!(
            base,
            key("acme", "r1", json!({"order_id": "ORD-2", "amount": 5}))
        );
        assert_ne!(
            base,
            key("acme", "r2", json!({"order_id": "ORD-1", "amount": 5}))
        );
        assert_ne!(
            base,
            key("globex", "r1", json!({"order_id": "ORD-1", "amount": 5}))
        );
        let tenant_wide = REFUND.clone().with_key_scope(KeyScope::Tenant);
        assert_eq!(
            operation_key(&tenant_wide, "acme", "r1", &json!({"order_id": "ORD-1"})),
            operation_key(&tenant_wide, "acme", "r2", &json!({"order_id": "ORD-1"}))
        );
    }

    #[test]
    fn escapes_are_canonical() {
        let value: Value = serde_json::from_str(r#"{"a": "\u00e9\n"}"#).unwrap();
        assert_eq!(canonical_json(&value), "{\"a\":\"é\\n\"}");
    }
}
