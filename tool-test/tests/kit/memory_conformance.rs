//! The conformance suite on the memory store: one test a rule, every rule in one call, and the
//! suite failing a store that breaks a rule, naming the rule.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use toolgate_test::conformance::{self, Case};
use toolgate_test::{ControlledStore, Fault, MemoryStore, Request};

toolgate_test::conformance_tests!(|case: Case| async move {
    case.run(&MemoryStore::new()).await;
});

#[tokio::test]
async fn every_rule_passes_in_one_call() {
    conformance::run_all(|| async { MemoryStore::new() }).await;
}

/// A store whose `purge` fails breaks the rules that purge, and only them: the suite runs every
/// rule, then names the one broken with its message.
#[tokio::test]
async fn the_suite_names_each_rule_a_store_breaks() {
    let broken = || async {
        let store = ControlledStore::new(Arc::new(MemoryStore::new()));
        store.fail_all(&[Request::Purge], Fault::Backend("purge is broken".into()));
        store
    };
    let panic = AssertUnwindSafe(conformance::run_all(broken))
        .catch_unwind()
        .await
        .expect_err("a store that cannot purge fails the suite");
    let message = panic
        .downcast_ref::<String>()
        .expect("the suite panics with words");
    assert!(
        message.starts_with("the store breaks 5 of the 68 conformance rules:\n"),
        "{message}"
    );
    assert!(
        message.contains("\n  retention_purges_only_terminal_records: ")
            && message.contains("\n  retention_purges_old_runs_and_keeps_recent_ones: ")
            && message.contains("\n  the_audit_seq_keeps_increasing_after_a_purge: ")
            && message.contains(
                "\n  retention_keeps_waiting_approvals_and_the_audit_of_living_operations: "
            )
            && message.contains("\n  retention_purges_events_and_steps_with_their_records: ")
            && message.contains("purge is broken"),
        "{message}"
    );
}

/// The rules have one name each, the name of their fn, and `run_all` runs every one of them.
#[test]
fn the_suite_lists_each_rule_once() {
    let names: Vec<&str> = conformance::cases().iter().map(Case::name).collect();
    assert_eq!(names.len(), 68, "{names:?}");
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert_eq!(names[0], "first_claim_acquires_attempt_one");
    assert_eq!(
        names.last().copied(),
        Some("issuer_keys_are_kept_per_tenant_once_and_in_order")
    );
}
