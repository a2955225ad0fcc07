//! `approvals list | show | approve | reject` on a SQLite file: what they print, what they
//! store, and every refusal with its exit code.

use toolgate_core::store::FailureNote;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    AbortRequest, ApprovalStatus, AuditKind, AuditQuery, DecideRequest, Decided, OperationState,
    Verdict,
};

use crate::support::{
    HOUR_MS, Issuer, SqliteFile, all_audit, approval, ask, edited, now_ms, sqlite_file, toolgate,
    toolgate_as, toolgate_env,
};

/// The token of acme's manager, who holds the approval permission.
fn manager(db: &SqliteFile) -> String {
    db.acme.token("manager", &["refund:approve"])
}

/// A SQLite file holding one approval waiting, `apr_a1` of acme, for an hour.
async fn one_waiting() -> SqliteFile {
    let db = sqlite_file().await;
    ask(
        &db.store,
        &approval("apr_a1", "acme", "k1", now_ms() + HOUR_MS),
    )
    .await;
    db
}

#[tokio::test]
async fn list_shows_the_pending_approvals_as_a_table_and_as_json() {
    let db = sqlite_file().await;
    let later = now_ms() + HOUR_MS;
    ask(&db.store, &approval("apr_a1", "acme", "k1", later)).await;
    ask(&db.store, &approval("apr_g1", "globex", "k1", later)).await;
    ask(&db.store, &approval("apr_a2", "acme", "k2", later)).await;
    ask(&db.store, &approval("apr_a3", "acme", "k3", later)).await;
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    let decided = db
        .store
        .decide(DecideRequest {
            id: "apr_a3",
            approver: &manager,
            verdict: Verdict::Reject,
            reason: "no",
            now_ms: now_ms(),
        })
        .await
        .unwrap();
    assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");

    // Pending by default: the rejected apr_a3 is not listed.
    let ran = toolgate(&db.arg, &["approvals", "list"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", ran.stdout);
    assert!(
        lines[0].starts_with("ID      TENANT  TOOL          AMOUNT   THRESHOLD  REQUESTER  STATUS"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1]
            .starts_with("apr_a1  acme    issue_refund  8000.00  5000       agent      pending"),
        "{}",
        lines[1]
    );
    assert!(ran.stdout.contains("apr_g1  globex"), "{}", ran.stdout);

    let ran = toolgate(
        &db.arg,
        &["approvals", "list", "--tenant", "acme", "--json"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["apr_a1", "apr_a2"]);
    assert_eq!(listed[0]["arguments"]["card_number"], "[redacted]");

    let ran = toolgate(&db.arg, &["approvals", "list", "--status", "approved"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "no approved approvals\n")
    );
}

#[tokio::test]
async fn show_prints_every_field_and_an_unknown_id_is_not_found() {
    let db = sqlite_file().await;
    let expires = now_ms() + HOUR_MS;
    let asked = approval("apr_a1", "acme", "k1", expires);
    ask(&db.store, &asked).await;

    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    for expected in [
        "tool                   issue_refund".to_owned(),
        r#"arguments              {"amount":"8000.00","card_number":"[redacted]","order_id":"ORD-1002"}"#.to_owned(),
        "amount                 8000.00".to_owned(),
        "threshold              5000".to_owned(),
        "requester              agent".to_owned(),
        "requester permissions  refund:create".to_owned(),
        "run                    run-1".to_owned(),
        "call                   call_1".to_owned(),
        "approver permission    refund:approve".to_owned(),
        "status                 pending".to_owned(),
        format!("expires                {}", rfc3339_of(expires)),
        "decisions              none".to_owned(),
    ] {
        assert!(ran.stdout.contains(&expected), "{expected:?} in\n{}", ran.stdout);
    }

    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["expires_ms"], expires);
    assert_eq!(shown["created_ms"], asked.created_ms);
    assert_eq!(shown["key"], "k1");
    assert_eq!(shown["call_id"], "call_1");

    let ran = toolgate(&db.arg, &["approvals", "show", "apr_nope"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("no approval apr_nope"),
        "{}",
        ran.stderr
    );
}

/// The time `ms` as the binary prints it, worked out here with the standard library only.
fn rfc3339_of(ms: i64) -> String {
    // Days since the epoch to a date, by counting: slow and obviously right.
    let mut days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let mut year = 1970;
    loop {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let length = if leap { 366 } else { 365 };
        if days < length {
            let mut month = 1;
            for month_days in [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ] {
                if days < month_days {
                    break;
                }
                days -= month_days;
                month += 1;
            }
            return format!(
                "{year:04}-{month:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                days + 1,
                in_day / 3_600_000,
                in_day / 60_000 % 60,
                in_day / 1000 % 60,
                in_day % 1000
            );
        }
        days -= length;
        year += 1;
    }
}

#[tokio::test]
async fn approve_stores_the_decision_and_its_audit_record() {
    let db = one_waiting().await;

    let args = [
        "approvals",
        "approve",
        "apr_a1",
        "--reason",
        "checked the order",
    ];
    let ran = toolgate_as(&db.arg, &manager(&db), &args);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.contains("approval apr_a1"), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("approved by manager: checked the order"),
        "{}",
        ran.stdout
    );

    let stored = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(stored.decisions.len(), 1);
    let decision = &stored.decisions[0];
    assert_eq!(
        (
            decision.verdict,
            decision.by.as_str(),
            decision.reason.as_str()
        ),
        (Verdict::Approve, "manager", "checked the order")
    );
    // The token's issuer vouches for the decision, and `approvals show` says so.
    assert_eq!(decision.issuer.as_deref(), Some("acme-ops"));
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout.contains("VERDICT  BY       ISSUER"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("approve  manager  acme-ops  checked the order"),
        "{}",
        ran.stdout
    );
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["decisions"][0]["issuer"], "acme-ops", "{shown}");
    assert_eq!(shown["decisions"][0]["by"], "manager", "{shown}");
    // Approved, the operation waits for its next claim to run.
    let record = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::AwaitingApproval);

    let audit = db
        .store
        .audit(AuditQuery {
            key: Some("k1"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let entry = &audit[0].entry;
    assert_eq!(entry.kind, AuditKind::Decision);
    assert_eq!(
        (
            entry.outcome.as_str(),
            entry.actor.as_str(),
            entry.reason.as_deref()
        ),
        ("approved", "manager", Some("checked the order"))
    );
    assert_eq!(entry.approval_id.as_deref(), Some("apr_a1"));

    // Decided, it is not decided again.
    let again = [
        "approvals",
        "reject",
        "apr_a1",
        "--reason",
        "changed my mind",
    ];
    let ran = toolgate_as(&db.arg, &manager(&db), &again);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("was already decided (approved)"),
        "{}",
        ran.stderr
    );
    assert_eq!(db.store.approval("apr_a1").await.unwrap().unwrap(), stored);
    // The refused attempt has its record, after the decision's.
    let audit = all_audit(&db.store).await;
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[1].entry.outcome, "refused");
    assert_eq!(audit[1].entry.actor, "manager");
    assert!(
        audit[1]
            .entry
            .reason
            .as_deref()
            .unwrap()
            .starts_with("asked to reject: "),
        "{audit:?}"
    );
}

#[tokio::test]
async fn reject_makes_the_approval_and_its_operation_rejected() {
    let db = one_waiting().await;

    let args = [
        "approvals",
        "reject",
        "apr_a1",
        "--reason",
        "duplicate refund",
    ];
    let ran = toolgate_as(&db.arg, &manager(&db), &args);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout.contains("rejected by manager: duplicate refund"),
        "{}",
        ran.stdout
    );

    let stored = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Rejected);
    assert_eq!(stored.decisions[0].verdict, Verdict::Reject);
    let record = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Rejected);
    let audit = all_audit(&db.store).await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].entry.outcome, "rejected");
}

/// Runs `approvals approve apr_a1` with the token `token` answers for the store, and asserts it
/// was refused with exit 1, saying `says`, that nothing was decided, and that the refused
/// attempt has its audit record.
async fn refused_and_unchanged(token: impl AsyncFnOnce(&SqliteFile) -> String, says: &str) {
    let db = one_waiting().await;
    let before = db.store.approval("apr_a1").await.unwrap().unwrap();

    let args = ["approvals", "approve", "apr_a1", "--reason", "ok"];
    let ran = toolgate_as(&db.arg, &token(&db).await, &args);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    assert_eq!(db.store.approval("apr_a1").await.unwrap().unwrap(), before);
    // Nothing was decided, and the refused attempt has its record.
    let audit = all_audit(&db.store).await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].entry.outcome, "refused");
    assert_eq!(audit[0].entry.approval_id.as_deref(), Some("apr_a1"));
    assert!(
        audit[0]
            .entry
            .reason
            .as_deref()
            .unwrap()
            .starts_with("asked to approve: "),
        "{audit:?}"
    );
}

#[tokio::test]
async fn the_requester_cannot_approve_their_own_call() {
    // A token of the tenant's own issuer, issued to the requester's subject.
    refused_and_unchanged(
        async |db| db.acme.token("agent", &["refund:approve"]),
        "agent asked for approval apr_a1 and cannot decide on it",
    )
    .await;
}

#[tokio::test]
async fn the_requester_renamed_with_a_space_or_an_invisible_character_cannot_approve() {
    let db = one_waiting().await;
    let before = db.store.approval("apr_a1").await.unwrap().unwrap();
    // The issuer's own key signs these, as a careless issuer of another library might: the
    // signature holds, and the subject is still refused.
    for renamed in ["agent ", "agent\u{200b}", "\u{feff}agent"] {
        let token = db.acme.hand_signed(serde_json::json!({
            "sub": renamed,
            "permissions": ["refund:approve"],
        }));
        let ran = toolgate_as(
            &db.arg,
            &token,
            &["approvals", "approve", "apr_a1", "--reason", "ok"],
        );
        assert_eq!(ran.code, 1, "{renamed:?}: {ran:?}");
        assert!(
            ran.stderr.contains("the operator token is refused")
                && ran.stderr.contains("is not an identifier"),
            "{renamed:?}: {}",
            ran.stderr
        );
    }
    // A token the requester was issued, its subject changed to the manager's after signing.
    let renamed = edited(&db.acme.token("agent", &["refund:approve"]), |claims| {
        claims["sub"] = "manager".into();
    });
    let ran = toolgate_as(
        &db.arg,
        &renamed,
        &["approvals", "approve", "apr_a1", "--reason", "ok"],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    for says in [
        "the operator token is refused",
        "its signature does not verify with the key of acme-ops (tenant acme)",
    ] {
        assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
    }
    // Refused at sign-in: nothing decided; each attempt recorded as refused, with no actor.
    assert_eq!(db.store.approval("apr_a1").await.unwrap().unwrap(), before);
    let audit = all_audit(&db.store).await;
    assert_eq!(audit.len(), 4, "{audit:?}");
    for record in audit {
        let entry = record.entry;
        assert_eq!(
            (entry.kind, entry.outcome.as_str(), entry.actor.as_str()),
            (AuditKind::Decision, "refused", "")
        );
        assert_eq!(entry.approval_id.as_deref(), Some("apr_a1"));
    }
}

#[tokio::test]
async fn another_tenants_operator_does_not_find_the_approval() {
    // Globex's own issuer, whose key the store holds for globex: its manager signs in, as
    // globex's, and finds no approval apr_a1 there.
    refused_and_unchanged(
        async |db| {
            let globex = Issuer::added(&db.store, "globex-ops", "globex").await;
            globex.token("manager", &["refund:approve"])
        },
        "there is no approval with this id in your tenant",
    )
    .await;
}

#[tokio::test]
async fn an_approver_without_the_permission_is_refused() {
    refused_and_unchanged(
        async |db| db.acme.token("clerk", &["refund:create"]),
        "takes the permission `refund:approve`, which the approver does not hold",
    )
    .await;
}

#[tokio::test]
async fn an_expired_approval_is_rejected_as_expired_instead() {
    let db = sqlite_file().await;
    // Asked two hours ago, expired an hour ago.
    ask(
        &db.store,
        &approval("apr_a1", "acme", "k1", now_ms() - HOUR_MS),
    )
    .await;

    let args = ["approvals", "approve", "apr_a1", "--reason", "late"];
    let ran = toolgate_as(&db.arg, &manager(&db), &args);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("expired before this decision"),
        "{}",
        ran.stderr
    );

    let stored = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Rejected);
    let decision = stored.last_decision().unwrap();
    assert_eq!(
        (decision.by.as_str(), decision.reason.as_str()),
        ("toolgate", "expired")
    );
    let record = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Rejected);
}

#[tokio::test]
async fn the_token_is_given_by_flag_or_environment_and_the_flag_wins() {
    let db = one_waiting().await;
    let store = ["--store", db.arg.as_str()];
    let decide = |verb: &'static str| {
        let mut args = store.to_vec();
        args.extend(["approvals", verb, "apr_a1", "--reason", "ok"]);
        args
    };

    // Without a token, or with an empty TOOLGATE_TOKEN: a usage error, before the store.
    for env in [&[][..], &[("TOOLGATE_TOKEN", "")]] {
        let ran = toolgate_env(&decide("reject"), env);
        assert_eq!(ran.code, 2, "{ran:?}");
        for says in [
            "no approver token",
            "--token TOKEN",
            "TOOLGATE_TOKEN",
            "toolgate operators issue",
        ] {
            assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
        }
    }
    let waiting = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(waiting.status, ApprovalStatus::Pending);
    assert!(all_audit(&db.store).await.is_empty());

    // --token wins over TOOLGATE_TOKEN: the lead's token in the environment is not used.
    let lead = db.acme.token("lead", &["refund:approve"]);
    let mut args = decide("approve");
    let token = manager(&db);
    args.extend(["--token", token.as_str()]);
    let ran = toolgate_env(&args, &[("TOOLGATE_TOKEN", lead.as_str())]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let stored = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.decisions[0].by, "manager");

    // TOOLGATE_TOKEN alone signs the lead in.
    let ran = toolgate_env(&decide("reject"), &[("TOOLGATE_TOKEN", lead.as_str())]);
    assert_eq!(ran.code, 1, "already decided: {ran:?}");
    let audit = all_audit(&db.store).await;
    assert_eq!(audit.last().unwrap().entry.actor, "lead", "{audit:?}");
}

/// `approvals show` says the state of the approval's run; the approval of an aborted run is
/// rejected as `run_aborted` by the abort, and approving it is refused, saying why.
#[tokio::test]
async fn show_says_the_runs_state_and_an_aborted_runs_approval_cannot_be_approved() {
    use toolgate_core::ErrorKind;
    use toolgate_core::run::RunAborted;
    use toolgate_core::store::RunKey;
    let db = sqlite_file().await;
    let expires = now_ms() + HOUR_MS;
    ask(&db.store, &approval("apr_a1", "acme", "k1", expires)).await;
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout
            .contains("run state              no record in this store"),
        "{}",
        ran.stdout
    );
    let run = RunKey {
        tenant: "acme",
        run_id: "run-1",
    };
    db.store
        .note_failure(FailureNote {
            run,
            tool: "lookup",
            request_hash: "h",
            now_ms: now_ms(),
        })
        .await
        .unwrap();
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1"]);
    assert!(
        ran.stdout
            .contains("run state              not aborted (0 turns, 0 tool calls, last changed "),
        "{}",
        ran.stdout
    );

    let abort = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "close_account needs\n`accounts:close`".into(),
    };
    let aborted = db
        .store
        .abort_run(AbortRequest {
            run,
            abort: &abort,
            now_ms: now_ms(),
        })
        .await
        .unwrap();
    assert_eq!(aborted.rejected.len(), 1);
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    for expected in [
        "status                 rejected",
        "run state              aborted (permission_denied): close_account needs `accounts:close`",
        "toolgate  -       run_aborted",
    ] {
        assert!(
            ran.stdout.contains(expected),
            "{expected:?} in\n{}",
            ran.stdout
        );
    }
    let ran = toolgate(&db.arg, &["approvals", "show", "apr_a1", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["run"]["state"], "aborted");
    assert_eq!(shown["run"]["aborted"]["kind"], "permission_denied");
    assert_eq!(shown["decisions"][0]["reason"], "run_aborted");

    let before = db.store.approval("apr_a1").await.unwrap().unwrap();
    let audited = all_audit(&db.store).await.len();
    let args = ["approvals", "approve", "apr_a1", "--reason", "ok"];
    let ran = toolgate_as(&db.arg, &manager(&db), &args);
    assert_eq!(ran.code, 1, "{ran:?}");
    for says in [
        "approval apr_a1 was rejected (`run_aborted`) when its run run-1 was aborted; it never runs",
        "toolgate approvals show apr_a1",
    ] {
        assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
    }
    assert_eq!(db.store.approval("apr_a1").await.unwrap().unwrap(), before);
    let audit = all_audit(&db.store).await;
    assert_eq!(
        audit.len(),
        audited + 1,
        "nothing decided, the attempt audited"
    );
    assert_eq!(audit[audited].entry.outcome, "refused");
}
