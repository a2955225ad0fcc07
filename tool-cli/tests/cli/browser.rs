//! The console in a real browser: a headless Chromium signs in, finds a refund of 8000.00
//! waiting, approves it, and the application's runner executes it once, with the decision in
//! the audit trail. The requester's own token is refused the approval, a form posted without its
//! CSRF token is refused, and a `<script>` in the model's arguments shows as text. Each page is
//! written as a screenshot under the target directory (`target/tmp/console/`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::{OperationStore, SqliteStore};
use toolgate_core::store::{ApprovalQuery, ApprovalStatus, AuditKind};

use crate::support::all_audit;
use crate::web::{ConsoleProcess, issuer, token};
use crate::webdriver::Browser;

/// How many refunds the provider made.
static REFUNDS: AtomicU32 = AtomicU32::new(0);

/// The script a model slipped into the note of its refund.
const SCRIPT: &str = "<script>alert('owned')</script>";

/// Refund an order.
#[tool(
    side_effect = "write",
    approval_over = 5000,
    approver = "refund:approve",
    key = [order_id],
    key_scope = "tenant"
)]
async fn issue_refund(order_id: String, amount: f64, note: String) -> Result<Value, ToolError> {
    REFUNDS.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"order_id": order_id, "refunded": amount, "note_length": note.len()}))
}

fn dispatcher(store: Arc<dyn OperationStore>) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<issue_refund>().unwrap();
    Dispatcher::builder(registry).store(store).build()
}

#[tokio::test]
async fn an_operator_approves_a_waiting_refund_in_a_browser_and_it_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shop.db");
    let store: Arc<dyn OperationStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let desk = dispatcher(Arc::clone(&store));
    let agent = AuthContext::new("acme", "agent").with_permissions(["refund:create"]);
    let session = Session::new(agent, "run-1");
    let call = ToolCall::new(
        "call_1",
        "issue_refund",
        json!({"order_id": "ORD-1002", "amount": 8000.00, "note": SCRIPT}),
    );
    let waiting = desk.dispatch(&session, call).await.unwrap();
    assert_eq!(REFUNDS.load(Ordering::SeqCst), 0, "{waiting:?}");
    let acme = issuer(store.as_ref(), "acme-ops", "acme").await;
    let console = ConsoleProcess::start(&format!("sqlite:{}", path.display()));
    let base = format!("http://{}", console.addr);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console");
    let browser = Browser::start(&shots).await;

    // The requester signs in with its own token, and is refused its own approval.
    browser.open(&format!("{base}/login")).await;
    browser.screenshot("1-sign-in").await;
    let requester = token(&acme, "agent", &["refund:create", "refund:approve"]);
    sign_in(&browser, &requester).await;
    approve(&browser, "I asked for it").await;
    let refused = browser.text("#flash").await;
    assert!(refused.contains("could not approve"), "{refused}");
    assert!(refused.contains("agent asked for approval"), "{refused}");
    browser.screenshot("2-requester-refused").await;
    browser.submit("header button[type=submit]").await;
    assert!(browser.url().await.ends_with("/login"));

    // The manager sees the refund waiting, the model's script as text.
    let manager = token(&acme, "manager", &["refund:approve"]);
    sign_in(&browser, &manager).await;
    // The amount as the dispatcher compared it with the threshold (the number 8000.00).
    let amount = browser.text("tr[data-approval] td.amount").await;
    assert_eq!(amount, "8000");
    let arguments = browser.text("tr[data-approval] td.arguments").await;
    assert!(arguments.contains(SCRIPT), "{arguments}");
    assert!(!browser.alert_open().await, "the script did not run");
    let scripts = browser.run("return document.scripts.length;").await;
    assert_eq!(scripts, 0, "the page holds no script element");
    browser.screenshot("3-approval-queue").await;

    // Its form without the CSRF token is refused, and nothing is decided.
    browser
        .run("document.querySelector('tr[data-approval] input[name=csrf]').remove();")
        .await;
    approve(&browser, "returned in full").await;
    let page = browser.text("main").await;
    assert!(
        page.contains("did not carry this session's CSRF token"),
        "{page}"
    );
    browser.screenshot("4-csrf-refused").await;
    assert_eq!(status_of(store.as_ref()).await, ApprovalStatus::Pending);

    // From the page as served, the manager approves.
    browser.open(&format!("{base}/approvals")).await;
    approve(&browser, "returned in full").await;
    let done = browser.text("#flash").await;
    assert!(done.contains("approved by manager"), "{done}");
    browser.screenshot("5-approved").await;
    assert_eq!(status_of(store.as_ref()).await, ApprovalStatus::Approved);

    // The application's runner executes it, once: a second pass finds nothing to run.
    let first = desk.run_approved(10).await.unwrap();
    let second = desk.run_approved(10).await.unwrap();
    assert_eq!((first.executed.len(), second.executed.len()), (1, 0));
    assert_eq!(REFUNDS.load(Ordering::SeqCst), 1);

    // The run's audit trail shows the call, the decision and the execution, in order.
    browser.open(&format!("{base}/audit?run=run-1")).await;
    let trail = browser.text("#trail").await;
    let decision = trail
        .find("approved")
        .expect("the decision is in the trail");
    assert!(trail.contains("manager"), "{trail}");
    assert!(trail[decision..].contains("succeeded"), "{trail}");
    browser.screenshot("6-audit-trail").await;
    let kinds: Vec<AuditKind> = all_audit(store.as_ref())
        .await
        .into_iter()
        .map(|r| r.entry.kind)
        .collect();
    assert!(kinds.contains(&AuditKind::Decision), "{kinds:?}");

    browser
        .open(&format!("{base}/operations?status=succeeded"))
        .await;
    assert!(browser.text("main").await.contains("ORD-1002"));
    browser.screenshot("7-operations").await;
    browser.open(&format!("{base}/outbox")).await;
    browser.screenshot("8-outbox").await;
}

/// Writes `reason` in the waiting approval's form and presses Approve, then waits for the page
/// the form leads to.
async fn approve(browser: &Browser, reason: &str) {
    browser
        .type_into("tr[data-approval] input[name=reason]", reason)
        .await;
    browser
        .submit("tr[data-approval] button[value=approve]")
        .await;
}

/// Signs in on the sign-in page with `token`, and lands on the approval queue.
async fn sign_in(browser: &Browser, token: &str) {
    if !browser.url().await.ends_with("/login") {
        panic!("not on the sign-in page: {}", browser.url().await);
    }
    browser.type_into("#token", token).await;
    browser.submit("#sign-in").await;
    let url = browser.url().await;
    assert!(url.ends_with("/approvals"), "signed in: {url}");
}

/// The status of the one approval in `store`.
async fn status_of(store: &dyn OperationStore) -> ApprovalStatus {
    let all = store
        .list_approvals(ApprovalQuery::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    all[0].status
}
