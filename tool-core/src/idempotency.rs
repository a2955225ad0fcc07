//! Keys and request hashes: derived by the runtime from the call, never invented by the model.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::descriptor::{KeyScope, ToolDescriptor};

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
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The hash of a request: the tool's name and the canonical JSON of all its arguments. Same key
/// with another hash is a conflict.
pub fn request_hash(tool: &str, canonical_arguments: &str) -> String {
    hex_sha256(&["request", tool, canonical_arguments])
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
/// tenant, the key, the call and the time it asked.
pub fn approval_id(tenant: &str, key: &str, call_id: &str, now_ms: i64) -> String {
    let hash = hex_sha256(&["approval", tenant, key, call_id, &now_ms.to_string()]);
    format!("apr_{}", &hash[..24])
}

/// The idempotency key of a call: a hash of the tenant, the scope (the run id, or the tenant
/// for `key_scope = "tenant"`), the tool's name and the canonical JSON of its key fields (all
/// arguments when the tool names none; a missing optional field counts as `null`). Stable
/// across retries, takeovers and restarts; handed to the provider as it is.
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
        assert_eq!(
            request_hash("issue_refund", &canonical_json(&a)),
            request_hash("issue_refund", &canonical_json(&b))
        );
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
