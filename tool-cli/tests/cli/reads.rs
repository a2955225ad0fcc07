//! `ops list | show` and `audit RUN` on a SQLite file.

use toolgate_core::store::prelude::*;

use toolgate_core::store::AuditKind;

use crate::support::{
    HOUR_MS, approval, ask, call_entry, now_ms, sqlite_file, succeeded, toolgate,
};

/// The keys in the `KEY` column of an `ops list` table (its second column).
fn keys_of(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().nth(1).unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn ops_list_filters_by_state_run_and_tenant() {
    let db = sqlite_file().await;
    succeeded(&db.store, "acme", "refund-1001", r#"{"refund_id":"rf_1"}"#).await;
    ask(
        &db.store,
        &approval("apr_a1", "acme", "refund-1002", now_ms() + HOUR_MS),
    )
    .await;
    succeeded(&db.store, "globex", "refund-7", r#"{"refund_id":"rf_7"}"#).await;
    // The run run-1 touched refund-1001 only, by the audit trail.
    db.store
        .append_audit(&call_entry(
            "acme",
            "run-1",
            "call_1",
            "issue_refund",
            Some("refund-1001"),
        ))
        .await
        .unwrap();
    db.store
        .append_audit(&call_entry(
            "acme",
            "run-2",
            "call_1",
            "issue_refund",
            Some("refund-1002"),
        ))
        .await
        .unwrap();

    let ran = toolgate(&db.arg, &["ops", "list"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.starts_with("TENANT  KEY"), "{}", ran.stdout);
    assert_eq!(
        keys_of(&ran.stdout),
        ["refund-1001", "refund-1002", "refund-7"]
    );

    let ran = toolgate(&db.arg, &["ops", "list", "--status", "awaiting_approval"]);
    assert_eq!(keys_of(&ran.stdout), ["refund-1002"], "{ran:?}");
    assert!(ran.stdout.contains("apr_a1"), "{}", ran.stdout);

    let ran = toolgate(
        &db.arg,
        &["ops", "list", "--status", "succeeded", "--tenant", "globex"],
    );
    assert_eq!(keys_of(&ran.stdout), ["refund-7"], "{ran:?}");

    let ran = toolgate(&db.arg, &["ops", "list", "--run", "run-1", "--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["key"], "refund-1001");
    assert_eq!(listed[0]["state"], "succeeded");
    assert_eq!(listed[0]["result"]["refund_id"], "rf_1");

    let ran = toolgate(&db.arg, &["ops", "list", "--status", "failed"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "no operations match\n")
    );
}

#[tokio::test]
async fn ops_show_needs_a_tenant_only_when_several_hold_the_key() {
    let db = sqlite_file().await;
    succeeded(&db.store, "acme", "refund-1001", r#"{"refund_id":"rf_1"}"#).await;
    succeeded(
        &db.store,
        "globex",
        "refund-1001",
        r#"{"refund_id":"rf_9"}"#,
    )
    .await;
    succeeded(&db.store, "acme", "refund-1003", r#"{"refund_id":"rf_3"}"#).await;

    let ran = toolgate(&db.arg, &["ops", "show", "refund-1003"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout.contains("state            succeeded"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains(r#"result           {"refund_id":"rf_3"}"#),
        "{}",
        ran.stdout
    );

    let ran = toolgate(&db.arg, &["ops", "show", "refund-1001"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(
        ran.stderr
            .contains("several tenants hold the key refund-1001"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("acme, globex"), "{}", ran.stderr);
    assert!(ran.stderr.contains("add --tenant"), "{}", ran.stderr);

    let ran = toolgate(
        &db.arg,
        &["ops", "show", "refund-1001", "--tenant", "globex", "--json"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["tenant"], "globex");
    assert_eq!(shown["result"]["refund_id"], "rf_9");

    let ran = toolgate(
        &db.arg,
        &["ops", "show", "refund-1003", "--tenant", "globex"],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains("no operation refund-1003 of tenant globex"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn audit_prints_a_runs_records_in_order_as_a_table_and_as_json() {
    let db = sqlite_file().await;
    let store: &dyn OperationStore = &db.store;
    let read = call_entry("acme", "run-1", "call_1", "lookup_order", None);
    let mut failed = call_entry(
        "acme",
        "run-1",
        "call_2",
        "issue_refund",
        Some("refund-1002"),
    );
    failed.outcome = "error".into();
    failed.error_kind = Some("timeout".into());
    failed.attempts = 3;
    let mut replay = call_entry(
        "acme",
        "run-1",
        "call_3",
        "issue_refund",
        Some("refund-1001"),
    );
    replay.replayed = true;
    replay.attempts = 0;
    let mut decision = call_entry(
        "acme",
        "run-1",
        "call_4",
        "issue_refund",
        Some("refund-1003"),
    );
    decision.kind = AuditKind::Decision;
    decision.outcome = "approved".into();
    decision.actor = "manager".into();
    decision.approval_id = Some("apr_a1".into());
    decision.reason = Some("checked".into());
    let other_run = call_entry("acme", "run-2", "call_1", "lookup_order", None);
    let other_tenant = call_entry("globex", "run-1", "call_1", "lookup_order", None);
    let mut seqs = Vec::new();
    for entry in [
        &read,
        &other_run,
        &failed,
        &other_tenant,
        &replay,
        &decision,
    ] {
        seqs.push(store.append_audit(entry).await.unwrap());
    }

    // run-1 is a run of two tenants: which one is asked.
    let ran = toolgate(&db.arg, &["audit", "run-1"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(
        ran.stderr.contains("several tenants have a run run-1"),
        "{}",
        ran.stderr
    );

    let ran = toolgate(&db.arg, &["audit", "run-1", "--tenant", "acme"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "run run-1 of tenant acme");
    assert!(
        lines[1].starts_with("SEQ  TIME")
            && lines[1].ends_with("KEY          APPROVAL  ACTOR    REASON"),
        "{}",
        lines[1]
    );
    assert_eq!(lines.len(), 6, "{}", ran.stdout);
    let cells: Vec<Vec<&str>> = lines[2..]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected_seqs = [seqs[0], seqs[2], seqs[4], seqs[5]].map(|s| s.to_string());
    assert_eq!(
        cells.iter().map(|c| c[0]).collect::<Vec<_>>(),
        expected_seqs
    );
    assert_eq!(cells[0][2..5], ["call", "call_1", "lookup_order"]);
    assert_eq!(cells[1][5..7], ["error", "(timeout)"]);
    assert_eq!(cells[1][7..11], ["3", "12ms", "42", "no"]);
    assert_eq!(cells[2][9], "yes", "{:?}", cells[2]);
    assert_eq!(
        cells[3][2..],
        [
            "decision",
            "call_4",
            "issue_refund",
            "approved",
            "1",
            "12ms",
            "42",
            "no",
            "refund-1003",
            "apr_a1",
            "manager",
            "checked"
        ]
    );

    let ran = toolgate(&db.arg, &["audit", "run-1", "--tenant", "acme", "--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let trail: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let trail = trail.as_array().unwrap();
    assert_eq!(trail.len(), 4);
    assert_eq!(trail[1]["error_kind"], "timeout");
    assert_eq!(trail[1]["attempts"], 3);
    assert_eq!(trail[2]["replayed"], true);
    assert_eq!(trail[3]["kind"], "decision");
    assert_eq!(trail[3]["reason"], "checked");
    assert_eq!(trail[0]["arguments"]["order_id"], "ORD-1001");

    let ran = toolgate(&db.arg, &["audit", "run-9"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("no audit records for run run-9"),
        "{}",
        ran.stderr
    );
}
