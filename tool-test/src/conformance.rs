//! The conformance suite every [`OperationStore`] must pass: one async fn a rule, each run on a
//! fresh, empty store.
//!
//! A store of your own runs it from its tests in one of three ways:
//!
//! - [`conformance_tests!`](crate::conformance_tests) writes one `#[test]` a rule, named after
//!   it, so a failure names the rule broken and the rules run in parallel;
//! - [`run_all`] runs every rule in one test and, when some fail, panics naming each of them;
//! - each rule is a public async fn taking `&dyn OperationStore`, for a `#[tokio::test]` of your
//!   own.
//!
//! ```
//! use toolgate_core::store::OperationStore;
//! use toolgate_test::MemoryStore;
//! use toolgate_test::conformance::{self, Case};
//!
//! /// A fresh store for one rule: a new database, file or schema in a real store.
//! async fn fresh_store() -> MemoryStore {
//!     MemoryStore::new()
//! }
//!
//! // One test a rule. Anything the store needs to outlive the rule (a temporary directory, a
//! // database handle) lives in the async block.
//! toolgate_test::conformance_tests!(|case: Case| async move {
//!     let store = fresh_store().await;
//!     case.run(&store).await;
//! });
//!
//! // Or every rule in one test.
//! #[tokio::test]
//! async fn my_store_passes_the_conformance_suite() {
//!     conformance::run_all(fresh_store).await;
//! }
//!
//! // Or one rule in a test of its own.
//! #[tokio::test]
//! async fn a_replay_returns_the_stored_result() {
//!     conformance::a_replay_returns_the_stored_result(&fresh_store().await).await;
//! }
//! # fn main() {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(
//! #         conformance::run_all(fresh_store),
//! #     );
//! #     let store: &dyn OperationStore = &MemoryStore::new();
//! #     let _ = store;
//! # }
//! ```
//!
//! The rules are grouped by the capability of the store they check (see
//! [`toolgate_core::store`]): claims ([`ClaimStore`](toolgate_core::store::ClaimStore): claims,
//! outcomes, takeovers, text), operations ([`OperationLog`](toolgate_core::store::OperationLog):
//! sweeps, reconciliation, retention), runs ([`RunLedger`](toolgate_core::store::RunLedger):
//! steps, tool calls, retry budgets, failed calls, aborts, retention, turns that claim),
//! approvals ([`ApprovalStore`](toolgate_core::store::ApprovalStore): waiting, deciding, running
//! once, expiring, listing, rejected with their aborted run), the outbox
//! ([`OutboxStore`](toolgate_core::store::OutboxStore): begin, commit, rollback, leases,
//! settlement, resume, reconciliation), steps ([`StepStore`](toolgate_core::store::StepStore):
//! steps, takeovers, `partial`, reconciliation) and the audit trail
//! ([`AuditStore`](toolgate_core::store::AuditStore): order, queries, retention), and the
//! issuers' keys ([`IssuerKeyStore`](toolgate_core::store::IssuerKeyStore)). They use fixed
//! times (milliseconds in 2023) and the tenants `acme` and `globex`: a store must not read the
//! clock itself.

// One module a capability of the store (see `toolgate_core::store`), each with the rules of the
// methods of its trait; a rule that needs another capability to set its scene (a claim, say)
// goes with the capability it checks.
mod approvals;
mod audit;
mod claims;
mod fixture;
mod issuer_keys;
mod operations;
mod outbox;
mod runs;
mod steps;

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures_util::FutureExt;
use toolgate_core::store::OperationStore;

pub use approvals::aborts::aborting_a_run_rejects_its_approvals_that_have_not_run;
pub use approvals::lists::{
    approvals_and_operations_are_listed_by_filter_in_order,
    list_approved_lists_only_approved_operations_not_yet_run,
    reject_claimed_rejects_an_approved_operation_before_it_runs,
};
pub use approvals::{
    a_claim_over_the_threshold_awaits_its_approval,
    a_decision_is_refused_to_the_requester_a_stranger_and_twice,
    a_rejected_approval_answers_its_rejection, an_approved_operation_runs_exactly_once,
    an_expired_approval_is_rejected_as_expired,
};
pub use audit::{
    a_success_and_its_audit_record_are_written_together,
    audit_records_appended_together_are_read_back_in_order,
    retention_keeps_waiting_approvals_and_the_audit_of_living_operations,
    the_audit_seq_keeps_increasing_after_a_purge,
    the_audit_trail_is_read_in_append_order_by_run_key_and_tenant,
};
pub use claims::outcomes::{
    a_stale_attempt_cannot_overwrite, retries_keep_every_error_and_renew_the_lease,
};
pub use claims::takeover::{
    a_corrected_request_takes_over_a_failed_record,
    a_request_takes_over_a_record_reconciled_as_not_applied,
    another_request_is_a_conflict_while_the_first_may_have_acted,
};
pub use claims::text::every_text_round_trips_whatever_its_characters;
pub use claims::{
    a_live_claim_is_in_progress, a_replay_returns_the_stored_result,
    an_expired_lease_becomes_unknown_unless_taken_over, an_unknown_outcome_is_never_claimed_again,
    another_request_under_the_same_key_is_a_conflict_and_stores_nothing,
    concurrent_claims_acquire_once, failed_can_be_claimed_again, first_claim_acquires_attempt_one,
    reordered_arguments_are_the_same_request, tenants_never_share_records,
};
pub use issuer_keys::issuer_keys_are_kept_per_tenant_once_and_in_order;
pub use operations::{
    expire_leases_turns_only_expired_processing_into_unknown,
    reconciliation_settles_unknown_outcomes, retention_purges_only_terminal_records,
};
pub use outbox::audit::a_delivery_and_its_audit_record_are_settled_together;
pub use outbox::maybe_applied::an_event_remembers_a_delivery_that_may_have_been_applied;
pub use outbox::{
    a_committed_outbox_call_is_queued_with_its_event, a_rolled_back_outbox_call_leaves_nothing,
    a_stale_or_unleased_event_is_not_settled, begin_answers_a_settled_key_as_claim_does,
    concurrent_leases_never_lease_an_event_twice,
    events_are_listed_by_filter_in_order_and_scoped_by_tenant,
    lease_events_takes_due_events_oldest_first, resolve_settles_an_outbox_operation_with_its_event,
    resume_event_makes_a_dead_event_pending_again,
    settle_event_records_the_delivery_with_its_operation,
};
pub use runs::turn_claims::{
    a_claim_that_begins_its_turn_can_ask_for_an_approval,
    a_claim_that_begins_its_turn_counts_it_and_claims_the_key,
    a_turn_that_does_not_let_the_write_claim_claims_nothing,
};
pub use runs::{
    a_failure_is_noted_once_and_listed_for_the_tools_of_a_turn, a_run_reads_back_every_counter,
    a_turn_is_the_next_step_and_grants_every_call,
    a_turn_past_the_call_limit_counts_its_step_and_no_call,
    a_turn_past_the_step_limit_counts_nothing,
    charge_attempt_counts_until_the_budget_and_then_nothing,
    concurrent_turns_never_grant_past_the_budget, retention_purges_old_runs_and_keeps_recent_ones,
    runs_of_two_tenants_never_share_counters, the_first_abort_stands_and_refuses_every_later_turn,
    the_retry_budget_grants_the_first_calls_in_order,
};
pub use steps::{
    a_partial_record_is_claimed_again_by_the_same_request_only,
    a_record_under_a_version_1_hash_is_the_same_request, a_step_of_a_claim_not_held_is_refused,
    a_step_runs_until_its_outcome_is_recorded, a_takeover_under_other_arguments_clears_the_journal,
    an_ended_lease_with_a_settled_journal_is_taken_over,
    reconciling_steps_as_not_applied_fails_the_started_ones,
    retention_purges_events_and_steps_with_their_records,
};

/// What a rule returns: the rule running on a store it borrows.
#[doc(hidden)]
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// One rule of the suite: its name and the check, to run on a store.
#[derive(Clone, Copy)]
pub struct Case {
    name: &'static str,
    check: for<'a> fn(&'a dyn OperationStore) -> CaseFuture<'a>,
}

impl Case {
    /// Made by the suite's own list; not for use outside this crate.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        check: for<'a> fn(&'a dyn OperationStore) -> CaseFuture<'a>,
    ) -> Case {
        Case { name, check }
    }

    /// The rule's name, which is also the name of its async fn in this module.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the rule on `store`, which must be fresh and empty. Panics when the store breaks
    /// the rule.
    pub async fn run(&self, store: &dyn OperationStore) {
        (self.check)(store).await;
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Case").field(&self.name).finish()
    }
}

/// Every rule of the suite, in the order [`run_all`] runs them.
pub fn cases() -> &'static [Case] {
    const CASES: &[Case] = crate::__conformance_cases!(table());
    CASES
}

/// Runs every rule, each on a fresh store from `make`. Every rule runs even when one fails;
/// then, when some failed, panics naming each of them with its message.
pub async fn run_all<S, F, Fut>(make: F)
where
    S: OperationStore,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    let mut failed = Vec::new();
    for case in cases() {
        let store = make().await;
        if let Err(panic) = AssertUnwindSafe(case.run(&store)).catch_unwind().await {
            failed.push(format!("{}: {}", case.name(), panic_message(&*panic)));
        }
    }
    assert!(
        failed.is_empty(),
        "the store breaks {} of the {} conformance rules:\n  {}",
        failed.len(),
        cases().len(),
        failed.join("\n  ")
    );
}

/// Runs the rule `name` through `run` on a runtime of its own: what each test written by
/// [`conformance_tests!`](crate::conformance_tests) does.
#[doc(hidden)]
pub fn run_case<F, Fut>(name: &str, run: F)
where
    F: FnOnce(Case) -> Fut,
    Fut: Future<Output = ()>,
{
    let case = cases()
        .iter()
        .find(|case| case.name() == name)
        .copied()
        .unwrap_or_else(|| panic!("{name} is not a rule of the conformance suite"));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the conformance rule")
        .block_on(run(case));
}

/// The words a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without words)")
}

/// Writes one `#[test]` for each rule of the [conformance suite](crate::conformance), named
/// after the rule.
///
/// Give it a closure that takes the rule (a [`Case`](crate::conformance::Case)), opens a fresh
/// store, and runs the rule on it with `case.run(&store).await`. Each test runs the closure on a
/// current-thread tokio runtime of its own, with time and I/O enabled.
///
/// ```
/// use toolgate_test::MemoryStore;
/// use toolgate_test::conformance::Case;
///
/// toolgate_test::conformance_tests!(|case: Case| async move {
///     case.run(&MemoryStore::new()).await;
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($run:expr $(,)?) => {
        $crate::__conformance_cases!(tests($run));
    };
}

/// The list of the rules, written once: the table of [`conformance::cases`] and the tests of
/// [`conformance_tests!`] are both made from it.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($mode:ident $args:tt) => {
        $crate::__conformance_cases! { @list $mode $args
            first_claim_acquires_attempt_one
            a_replay_returns_the_stored_result
            reordered_arguments_are_the_same_request
            another_request_under_the_same_key_is_a_conflict_and_stores_nothing
            tenants_never_share_records
            a_stale_attempt_cannot_overwrite
            failed_can_be_claimed_again
            an_unknown_outcome_is_never_claimed_again
            a_live_claim_is_in_progress
            an_expired_lease_becomes_unknown_unless_taken_over
            expire_leases_turns_only_expired_processing_into_unknown
            retries_keep_every_error_and_renew_the_lease
            reconciliation_settles_unknown_outcomes
            retention_purges_only_terminal_records
            concurrent_claims_acquire_once
            a_corrected_request_takes_over_a_failed_record
            a_request_takes_over_a_record_reconciled_as_not_applied
            another_request_is_a_conflict_while_the_first_may_have_acted
            a_turn_is_the_next_step_and_grants_every_call
            a_turn_past_the_step_limit_counts_nothing
            a_turn_past_the_call_limit_counts_its_step_and_no_call
            the_retry_budget_grants_the_first_calls_in_order
            charge_attempt_counts_until_the_budget_and_then_nothing
            a_failure_is_noted_once_and_listed_for_the_tools_of_a_turn
            the_first_abort_stands_and_refuses_every_later_turn
            runs_of_two_tenants_never_share_counters
            a_run_reads_back_every_counter
            retention_purges_old_runs_and_keeps_recent_ones
            concurrent_turns_never_grant_past_the_budget
            a_claim_that_begins_its_turn_counts_it_and_claims_the_key
            a_turn_that_does_not_let_the_write_claim_claims_nothing
            a_claim_that_begins_its_turn_can_ask_for_an_approval
            a_claim_over_the_threshold_awaits_its_approval
            an_approved_operation_runs_exactly_once
            a_rejected_approval_answers_its_rejection
            a_decision_is_refused_to_the_requester_a_stranger_and_twice
            an_expired_approval_is_rejected_as_expired
            list_approved_lists_only_approved_operations_not_yet_run
            reject_claimed_rejects_an_approved_operation_before_it_runs
            approvals_and_operations_are_listed_by_filter_in_order
            aborting_a_run_rejects_its_approvals_that_have_not_run
            the_audit_trail_is_read_in_append_order_by_run_key_and_tenant
            a_success_and_its_audit_record_are_written_together
            audit_records_appended_together_are_read_back_in_order
            the_audit_seq_keeps_increasing_after_a_purge
            retention_keeps_waiting_approvals_and_the_audit_of_living_operations
            every_text_round_trips_whatever_its_characters
            a_committed_outbox_call_is_queued_with_its_event
            a_rolled_back_outbox_call_leaves_nothing
            begin_answers_a_settled_key_as_claim_does
            lease_events_takes_due_events_oldest_first
            concurrent_leases_never_lease_an_event_twice
            settle_event_records_the_delivery_with_its_operation
            a_delivery_and_its_audit_record_are_settled_together
            a_stale_or_unleased_event_is_not_settled
            resume_event_makes_a_dead_event_pending_again
            resolve_settles_an_outbox_operation_with_its_event
            an_event_remembers_a_delivery_that_may_have_been_applied
            events_are_listed_by_filter_in_order_and_scoped_by_tenant
            a_step_runs_until_its_outcome_is_recorded
            a_step_of_a_claim_not_held_is_refused
            an_ended_lease_with_a_settled_journal_is_taken_over
            a_partial_record_is_claimed_again_by_the_same_request_only
            a_record_under_a_version_1_hash_is_the_same_request
            a_takeover_under_other_arguments_clears_the_journal
            reconciling_steps_as_not_applied_fails_the_started_ones
            retention_purges_events_and_steps_with_their_records
            issuer_keys_are_kept_per_tenant_once_and_in_order
        }
    };
    (@list table () $($case:ident)*) => {
        &[$({
            fn check(
                store: &dyn $crate::__private::OperationStore,
            ) -> $crate::conformance::CaseFuture<'_> {
                ::std::boxed::Box::pin($crate::conformance::$case(store))
            }
            $crate::conformance::Case::new(::std::stringify!($case), check)
        }),*]
    };
    (@list tests ($run:expr) $($case:ident)*) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::run_case(::std::stringify!($case), $run);
            }
        )*
    };
}
