//! A `#[sensitive]` value cannot be recovered by guessing: calls carrying a 4-digit PIN are
//! dispatched into a SQLite file, then every one of the 10,000 PINs is hashed every way an
//! attacker without the application's secret can, and looked for in every byte of the file and
//! in everything `toolgate` prints about it. With the secret, the same search finds the PIN in
//! what `--show-hashes` prints, and only there.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate::idempotency::HashSecret;
use toolgate::idempotency::request_hash;
use toolgate::prelude::*;
use toolgate::store::{OperationStore, SqliteStore};

use crate::support::{Ran, toolgate};

/// The PIN the calls carry.
const PIN: &str = "4821";

/// The application's secret, held outside the store.
fn secret() -> HashSecret {
    HashSecret::new("the application's own secret, 32 bytes or more").unwrap()
}

/// Pay an order with a card and its PIN.
#[tool(side_effect = "write", approval_over = 5000, key = [order_id], key_scope = "tenant")]
async fn pay(order_id: String, amount: f64, #[sensitive] pin: String) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "amount": amount, "pin_length": pin.len()}))
}

/// Check a card's PIN.
#[tool]
async fn check_pin(card_id: String, #[sensitive] pin: String) -> Result<Value, ToolError> {
    Err(ToolError::refused(format!("the PIN of {card_id} is wrong"))
        .with_why(format!("{} digits do not match", pin.len())))
}

/// The calls made: each tool's name and its arguments, the PIN among them.
fn calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "pay",
            json!({"order_id": "ORD-1", "amount": 8000, "pin": PIN}),
        ),
        (
            "pay",
            json!({"order_id": "ORD-2", "amount": 120, "pin": PIN}),
        ),
        ("check_pin", json!({"card_id": "CARD-7", "pin": PIN})),
    ]
}

/// Dispatches [`calls`] as the application does, into `store`.
async fn dispatch(store: Arc<dyn OperationStore>) {
    let mut registry = Registry::new();
    registry.register::<pay>().unwrap();
    registry.register::<check_pin>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(store)
        .hash_secret(secret())
        .build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    for (index, (tool, args)) in calls().into_iter().enumerate() {
        let call = ToolCall::new(format!("call_{index}"), tool, args);
        dispatcher.dispatch(&session, call).await.unwrap();
    }
}

/// The unkeyed SHA-256 of length-prefixed parts, in hex: how request hashes and keys were made
/// before they were keyed.
fn sha256_parts(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

/// The hex digits of the request hash keyed with `secret`.
fn keyed(secret: &HashSecret, tool: &str, canonical: &str) -> String {
    let hash = request_hash(secret, tool, canonical);
    hash.trim_start_matches("v2:").to_owned()
}

fn sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `args` with `pin` in place of the PIN, as canonical JSON.
fn with_pin(args: &Value, pin: &str) -> String {
    let mut guess: Map<String, Value> = args.as_object().unwrap().clone();
    guess.insert("pin".into(), Value::String(pin.into()));
    toolgate::idempotency::canonical_json(&Value::Object(guess))
}

/// Every derivation of a hash from `tool`, its arguments `canonical` and `pin` that an attacker
/// without the application's secret can compute: the unkeyed request hash, the request hash
/// keyed with the public local default, a key over every argument, plain SHA-256 of the
/// arguments and of the PIN.
fn guesses(tool: &str, canonical: &str, pin: &str) -> Vec<String> {
    vec![
        sha256_parts(&["request", tool, canonical]),
        keyed(&HashSecret::local_default(), tool, canonical),
        sha256_parts(&["key", "acme", "tenant", "", tool, canonical]),
        sha256_parts(&["key", "acme", "run", "run-1", tool, canonical]),
        sha256(canonical),
        sha256(&format!("{tool}{canonical}")),
        sha256(pin),
    ]
}

/// The first 16 hex digits of every run of at least 16 in `text`, at every offset: a printed
/// hash, whole or cut (a key keeps 40 digits, an approval id 24), holds the start of the hash it
/// was cut from.
fn hex_windows(text: &str) -> HashSet<String> {
    let mut windows = HashSet::new();
    for run in text.split(|c: char| !c.is_ascii_hexdigit()) {
        let run = run.to_ascii_lowercase();
        for start in 0..run.len().saturating_sub(15) {
            windows.insert(run[start..start + 16].to_owned());
        }
    }
    windows
}

/// The PINs one of whose `guesses` (of a tool, canonical arguments and a PIN) appears in
/// `windows`.
fn recovered(
    windows: &HashSet<String>,
    guesses: impl Fn(&str, &str, &str) -> Vec<String>,
) -> Vec<String> {
    let mut found = Vec::new();
    for guess in 0..10_000 {
        let pin = format!("{guess:04}");
        let hit = calls().iter().any(|(tool, args)| {
            guesses(tool, &with_pin(args, &pin), &pin)
                .iter()
                .any(|hash| windows.contains(&hash[..16]))
        });
        if hit {
            found.push(pin);
        }
    }
    found
}

/// Everything the store keeps: every file of its directory, byte for byte.
fn everything_stored(dir: &std::path::Path) -> String {
    let mut stored = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        stored.push_str(&String::from_utf8_lossy(&bytes));
    }
    stored
}

/// Everything `toolgate` prints about the calls, as tables and as JSON, each command given
/// `extra` too.
fn everything_printed(store: &str, extra: &[&str]) -> String {
    let ran = |args: &[&str]| -> String {
        let args = [args, extra].concat();
        let Ran { code, stdout, .. } = toolgate(store, &args);
        assert_eq!(code, 0, "{args:?}: {stdout}");
        stdout
    };
    let approvals = ran(&["approvals", "list", "--status", "all", "--json"]);
    let listed: Value = serde_json::from_str(&approvals).unwrap();
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let operations = ran(&["ops", "list", "--json"]);
    let ops: Value = serde_json::from_str(&operations).unwrap();
    let mut shown = String::new();
    shown.push_str(&approvals);
    shown.push_str(&operations);
    shown.push_str(&ran(&["approvals", "list", "--status", "all"]));
    shown.push_str(&ran(&["approvals", "show", &id, "--json"]));
    shown.push_str(&ran(&["approvals", "show", &id]));
    shown.push_str(&ran(&["ops", "list"]));
    for op in ops.as_array().unwrap() {
        let key = op["key"].as_str().unwrap();
        shown.push_str(&ran(&["ops", "show", key, "--json"]));
        shown.push_str(&ran(&["ops", "show", key]));
    }
    if extra.is_empty() {
        shown.push_str(&ran(&["audit", "run-1", "--json"]));
        shown.push_str(&ran(&["audit", "run-1"]));
    }
    shown
}

#[tokio::test]
async fn a_sensitive_pin_is_not_recovered_from_the_store_or_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await.unwrap();
    dispatch(Arc::new(store.clone())).await;
    store.close().await;
    let arg = format!("sqlite:{}", path.display());
    let stored = everything_stored(dir.path());
    let printed = everything_printed(&arg, &[]);
    assert!(stored.contains("[redacted]") && printed.contains("[redacted]"));
    let shown = hex_windows(&(stored.clone() + &printed));
    let found = recovered(&shown, guesses);
    assert!(found.is_empty(), "recovered by guessing: {found:?}");

    // The search works: with the secret, the hashes `--show-hashes` prints give the PIN away,
    // as the store's do; without the flag, nothing is printed to search.
    let with_secret =
        |tool: &str, canonical: &str, _: &str| vec![keyed(&secret(), tool, canonical)];
    let asked = everything_printed(&arg, &["--show-hashes"]);
    assert_eq!(recovered(&hex_windows(&asked), with_secret), [PIN]);
    assert_eq!(recovered(&hex_windows(&stored), with_secret), [PIN]);
    assert_eq!(
        recovered(&hex_windows(&printed), with_secret),
        [] as [&str; 0]
    );
    assert!(!printed.contains("hash"), "{printed}");
}
