//! `update_crm_and_notify` on the refund desk: a CRM update that succeeded is journaled, a
//! notification that failed makes the call `partial`, and calling again runs only the
//! notification, so the customer's CRM record is updated once.

use crate::support::{only_result, play};
use serde_json::{Value, json};

const FAST: [&str; 2] = ["--provider-timeout-ms", "300"];

/// The steps of a result, as (name, status, replayed).
fn steps(result: &Value) -> Vec<(String, String, bool)> {
    result["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps: {result}"))
        .iter()
        .map(|step| {
            (
                step["name"].as_str().unwrap().to_owned(),
                step["status"].as_str().unwrap().to_owned(),
                step["replayed"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn step(name: &str, status: &str, replayed: bool) -> (String, String, bool) {
    (name.to_owned(), status.to_owned(), replayed)
}

#[test]
fn a_failed_notification_is_partial_and_a_repeat_runs_only_the_notification() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/crm-update-then-notification-fails.jsonl"
    ))
    .unwrap();
    let answers = play(&script, &FAST);
    assert_eq!(answers.len(), 5, "{answers:?}");

    let partial = only_result(&answers[0]);
    assert_eq!(partial["status"], "partial", "{partial}");
    assert_eq!(
        steps(&partial),
        [
            step("update_crm", "succeeded", false),
            step("notify", "failed", false)
        ],
        "{partial}"
    );
    assert_eq!(partial["steps"][0]["output"]["action_id"], "crm_000001");
    assert_eq!(
        partial["steps"][1]["error"]["what"],
        "the payment provider answered 503 Service Unavailable",
        "{partial}"
    );
    let next = partial["error"]["next"].as_str().unwrap();
    assert!(
        next.contains("update_crm is done and is not run again; only notify runs again"),
        "{partial}"
    );

    // The notification still fails: the CRM update is answered from the journal, not redone.
    let again = only_result(&answers[1]);
    assert_eq!(again["status"], "partial", "{again}");
    assert_eq!(
        steps(&again),
        [
            step("update_crm", "succeeded", true),
            step("notify", "failed", false)
        ],
        "{again}"
    );

    let done = only_result(&answers[2]);
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        done["data"],
        json!({"order_id": "ORD-1003", "crm_update": "crm_000001", "notification": "ntf_000001"}),
        "{done}"
    );
    let replay = only_result(&answers[3]);
    assert_eq!(replay["status"], "succeeded", "{replay}");
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(replay["data"], done["data"]);

    let ledger = &answers[4];
    assert_eq!(
        ledger["crm"],
        json!({"ORD-1003": 1}),
        "updated once: {ledger}"
    );
    assert_eq!(ledger["notify"], json!({"ORD-1003": 1}), "{ledger}");
    assert_eq!(
        ledger["provider_requests"]["crm"], 1,
        "the CRM was asked once in four calls: {ledger}"
    );
    assert_eq!(
        ledger["provider_requests"]["notify"], 3,
        "two 503s, then the notification: {ledger}"
    );
}

#[test]
fn the_tool_needs_crm_write() {
    let turn = crate::support::call(
        "call_1",
        "update_crm_and_notify",
        json!({"order_id": "ORD-1001"}),
    );
    // The default session holds orders:read and refund:create only.
    let answers = play(&format!("{turn}\n"), &FAST);
    assert_eq!(
        answers[0]["run_aborted"]["kind"], "permission_denied",
        "{answers:?}"
    );
    assert_eq!(answers[1]["provider_requests"]["crm"], 0);
}
