//! The audit trail: records appended in order and read back whole, by run, operation and
//! tenant; and retention, which never removes a waiting approval nor an audit record before
//! its operation.

use toolgate_core::store::{
    ApprovalStatus, AuditEntry, AuditKind, AuditQuery, AuditRecord, OperationState, OperationStore,
    StoreError, Success, Verdict,
};

use super::fixture::{
    T0, acquire, approval, approval_of, approver, awaiting, decide, entry, owner, request,
};

/// The records `query` reads.
async fn read(store: &dyn OperationStore, query: AuditQuery<'_>) -> Vec<AuditRecord> {
    store.audit(query).await.expect("read the audit trail")
}

/// The `seq`s of `records`, in order.
fn seqs(records: &[AuditRecord]) -> Vec<i64> {
    records.iter().map(|r| r.seq).collect()
}

/// Every field of an audit record is read back as appended, in the order appended (each `seq`
/// greater than the one before); queries by run, by operation and by tenant admit only theirs,
/// the first `limit` of them.
pub async fn the_audit_trail_is_read_in_append_order_by_run_key_and_tenant(
    store: &dyn OperationStore,
) {
    let asked = AuditEntry {
        outcome: "awaiting_approval".into(),
        approval_id: Some("apr_1".into()),
        attempts: 0,
        bytes: 5_000_000_000,
        ..entry("acme", "run-1", "call_1", Some("k1"), T0)
    };
    let failed_read = AuditEntry {
        tool: "lookup_order".into(),
        arguments: "null".into(),
        outcome: "error".into(),
        error_kind: Some("not_found".into()),
        attempts: 3,
        duration_ms: 1_234,
        ..entry("acme", "run-1", "call_2", None, T0 + 1)
    };
    let decided = AuditEntry {
        kind: AuditKind::Decision,
        actor: "manager «Zoë»".into(),
        outcome: "approved".into(),
        attempts: 0,
        duration_ms: 0,
        bytes: 0,
        approval_id: Some("apr_1".into()),
        reason: Some("checked \"twice\"\nwith the customer".into()),
        ..entry("acme", "run-1", "call_1", Some("k1"), T0 + 2)
    };
    let theirs = entry("globex", "run-1", "call_1", Some("k1"), T0 + 3);
    let replayed = AuditEntry {
        replayed: true,
        attempts: 0,
        ..entry("acme", "run-2", "call_1", Some("k1"), T0 + 4)
    };
    let entries = [asked, failed_read, decided, theirs, replayed];
    let mut appended = Vec::new();
    for entry in &entries {
        let seq = store.append_audit(entry).await.expect("append");
        if let Some(last) = appended.last().map(|r: &AuditRecord| r.seq) {
            assert!(seq > last, "seq {seq} after {last}");
        }
        appended.push(AuditRecord {
            seq,
            entry: entry.clone(),
        });
    }
    assert_eq!(read(store, AuditQuery::default()).await, appended);

    let only =
        |indexes: &[usize]| -> Vec<i64> { indexes.iter().map(|&i| appended[i].seq).collect() };
    let query = |tenant, run_id, key, limit| AuditQuery {
        tenant,
        run_id,
        key,
        limit,
    };
    for (q, expected) in [
        (query(None, Some("run-1"), None, 0), only(&[0, 1, 2, 3])),
        (
            query(Some("acme"), Some("run-1"), None, 0),
            only(&[0, 1, 2]),
        ),
        (query(None, None, Some("k1"), 0), only(&[0, 2, 3, 4])),
        (query(Some("acme"), None, Some("k1"), 0), only(&[0, 2, 4])),
        (query(Some("globex"), None, None, 0), only(&[3])),
        (query(None, Some("run-2"), Some("k1"), 0), only(&[4])),
        (query(None, None, None, 2), only(&[0, 1])),
        (query(None, Some("run-1"), None, 3), only(&[0, 1, 2])),
        (query(None, Some("run-3"), None, 0), only(&[])),
        (query(None, None, Some("k2"), 0), only(&[])),
    ] {
        assert_eq!(seqs(&read(store, q).await), expected, "{q:?}");
    }
}

/// A purge never makes `seq` go back: a record appended after the trail was purged empty is
/// numbered after every earlier one.
pub async fn the_audit_seq_keeps_increasing_after_a_purge(store: &dyn OperationStore) {
    let first = store
        .append_audit(&entry("acme", "run-1", "call_1", None, T0))
        .await
        .unwrap();
    let second = store
        .append_audit(&entry("acme", "run-1", "call_2", None, T0 + 1))
        .await
        .unwrap();
    assert!(second > first);
    store.purge(T0 + 10).await.unwrap();
    assert_eq!(read(store, AuditQuery::default()).await, vec![]);
    let third = store
        .append_audit(&entry("acme", "run-2", "call_1", None, T0 + 20))
        .await
        .unwrap();
    assert!(third > second, "seq {third} after a purge, {second} before");
}

/// Retention keeps an operation awaiting its approval, however old, with its approval, which
/// can still be approved and run; it purges rejected operations past retention with their
/// approvals, as it does settled ones; it removes old audit records only when their operation
/// has no record any more (or they name none), and never recent ones.
pub async fn retention_keeps_waiting_approvals_and_the_audit_of_living_operations(
    store: &dyn OperationStore,
) {
    let manager = approver("acme", "manager");
    for (id, key, at) in [
        ("apr_1", "k1", T0),
        ("apr_2", "k2", T0),
        ("apr_3", "k3", T0 + 99_000),
        ("apr_5", "k5", T0),
    ] {
        let asked = approval(id, "acme", key, "h1", at);
        assert_eq!(approval_of(store, awaiting(&asked, at)).await, asked);
    }
    decide(store, "apr_2", &manager, Verdict::Reject, T0 + 1).await;
    decide(store, "apr_3", &manager, Verdict::Reject, T0 + 100_000).await;
    decide(store, "apr_5", &manager, Verdict::Approve, T0 + 1).await;
    assert_eq!(acquire(store, request("acme", "k5", "h1", T0 + 2)).await, 1);
    store
        .succeed(Success {
            owner: &owner("acme", "k5", 1),
            result: "{}",
            now_ms: T0 + 3,
            audit: None,
        })
        .await
        .unwrap();
    let done = acquire(store, request("acme", "k4", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "k4", done),
            result: "{}",
            now_ms: T0 + 1,
            audit: None,
        })
        .await
        .unwrap();

    let mut kept = Vec::new();
    for (tenant, key, at, keep) in [
        ("acme", Some("k1"), T0, true),
        ("acme", Some("k2"), T0, false),
        ("acme", None, T0, false),
        ("acme", Some("k2"), T0 + 60_000, true),
        ("acme", Some("k4"), T0 + 1, false),
        ("acme", Some("k9"), T0, false),
        ("globex", Some("k1"), T0, false),
        ("acme", Some("k3"), T0 + 2, true),
    ] {
        let seq = store
            .append_audit(&entry(tenant, "run-1", "call_1", key, at))
            .await
            .unwrap();
        if keep {
            kept.push(seq);
        }
    }

    assert_eq!(store.purge(T0 + 50_000).await.unwrap(), 3);
    for (key, exists) in [
        ("k1", true),
        ("k2", false),
        ("k3", true),
        ("k4", false),
        ("k5", false),
    ] {
        assert_eq!(
            store.get("acme", key).await.unwrap().is_some(),
            exists,
            "{key}"
        );
    }
    for (id, exists) in [
        ("apr_1", true),
        ("apr_2", false),
        ("apr_3", true),
        ("apr_5", false),
    ] {
        assert_eq!(store.approval(id).await.unwrap().is_some(), exists, "{id}");
    }
    assert_eq!(seqs(&read(store, AuditQuery::default()).await), kept);

    let approved = decide(store, "apr_1", &manager, Verdict::Approve, T0 + 60_000).await;
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(
        acquire(store, request("acme", "k1", "h1", T0 + 60_001)).await,
        1
    );
}

/// A success recorded with its call's audit record: both are written, the record read back
/// whole; under a claim no longer held, neither is, and the store answers `LostClaim`.
pub async fn a_success_and_its_audit_record_are_written_together(store: &dyn OperationStore) {
    let attempt = acquire(store, request("acme", "k-audited", "h1", T0)).await;
    let ran = AuditEntry {
        outcome: "succeeded".into(),
        bytes: 42,
        ..entry("acme", "run-audited", "call_1", Some("k-audited"), T0 + 5)
    };
    let seq = store
        .succeed(Success {
            owner: &owner("acme", "k-audited", attempt),
            result: "{\"ok\":1}",
            now_ms: T0 + 5,
            audit: Some(&ran),
        })
        .await
        .expect("record the success with its audit record");
    let record = store
        .get("acme", "k-audited")
        .await
        .expect("read the record")
        .expect("the record is there");
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.result.as_deref(), Some("{\"ok\":1}"));
    let query = AuditQuery {
        run_id: Some("run-audited"),
        ..AuditQuery::default()
    };
    let written = read(store, query).await;
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].entry, ran);
    if let Some(seq) = seq {
        assert_eq!(written[0].seq, seq);
    }

    // The claim is settled: a second success under it writes nothing, audit record included.
    let again = AuditEntry {
        call_id: "call_2".into(),
        ..ran.clone()
    };
    let lost = store
        .succeed(Success {
            owner: &owner("acme", "k-audited", attempt),
            result: "{\"ok\":2}",
            now_ms: T0 + 6,
            audit: Some(&again),
        })
        .await
        .expect_err("the claim is no longer held");
    assert!(matches!(lost, StoreError::LostClaim { .. }), "{lost:?}");
    assert_eq!(read(store, query).await.len(), 1, "no second record");
}

/// Audit records appended together are read back whole, in the order given, each numbered after
/// the one before and after every earlier record; none when the store refuses one of them.
pub async fn audit_records_appended_together_are_read_back_in_order(store: &dyn OperationStore) {
    let before = store
        .append_audit(&entry("acme", "run-together", "call_0", None, T0))
        .await
        .expect("append");
    let together: Vec<AuditEntry> = (1..=5)
        .map(|i| AuditEntry {
            tool: format!("lookup_«{i}»"),
            arguments: format!(r#"{{"order_id":"ORD-{i}"}}"#),
            error_kind: (i % 2 == 0).then(|| "not_found".to_owned()),
            outcome: if i % 2 == 0 { "error" } else { "succeeded" }.into(),
            reason: (i == 3).then(|| "a \"quoted\"\nreason".to_owned()),
            replayed: i == 4,
            ..entry("acme", "run-together", &format!("call_{i}"), None, T0 + i)
        })
        .collect();
    store.append_audits(&[]).await.expect("append nothing");
    store
        .append_audits(&together)
        .await
        .expect("append the records together");
    let query = AuditQuery {
        run_id: Some("run-together"),
        ..AuditQuery::default()
    };
    let written = read(store, query).await;
    let entries: Vec<&AuditEntry> = written.iter().map(|r| &r.entry).collect();
    assert_eq!(entries[1..], together.iter().collect::<Vec<_>>()[..]);
    let numbers = seqs(&written);
    assert_eq!(numbers[0], before);
    assert!(
        numbers.windows(2).all(|pair| pair[0] < pair[1]),
        "numbered in order: {numbers:?}"
    );

    // A record the store cannot hold: either it takes all of them, or none.
    let refused = [
        entry("acme", "run-refused", "call_1", None, T0),
        AuditEntry {
            bytes: u64::MAX,
            ..entry("acme", "run-refused", "call_2", None, T0)
        },
    ];
    let held = store.append_audits(&refused).await;
    let query = AuditQuery {
        run_id: Some("run-refused"),
        ..AuditQuery::default()
    };
    let written = read(store, query).await.len();
    match held {
        Ok(()) => assert_eq!(written, 2),
        Err(_) => assert_eq!(written, 0, "a refused batch wrote {written} of its records"),
    }
}
