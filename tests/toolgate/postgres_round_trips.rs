//! What a call costs the PostgreSQL store, counted on the wire: round trips, statements and
//! commits of a write call, a read call, a turn of five reads and a turn of five writes, with the
//! default run limits and the audit trail on, in a run counted in the store and in an unshared
//! run (counted in its session); and what an outbox worker's delivery costs, with its audit
//! record. The audit records of a turn's reads are written
//! after the turn answers, in one statement: counted apart, after the turn's path. A count, not a time: the test fails when a call sends more statements
//! than the store's budget, and prints what it sent (run it with `--nocapture` for the figures).
//!
//! A [`CountingProxy`] sits between the store and the server. Each figure is counted over calls
//! that reuse the store's warm connection and prepared statements. The store takes a connection
//! back before a call returns, checking none (sqlx's pool pinged each one it handed out and took
//! back, three round trips a statement): what a turn cost is on the wire when the turn returns.

use std::sync::Arc;

use serde_json::json;
use toolgate::outbox::OutboxWorker;
use toolgate::prelude::*;
use toolgate::store::{AuditKind, AuditQuery, OperationStore, OutboxEvent, PostgresStore};
use toolgate_test_postgres::{CountingProxy, Tally, test_database};

/// Refund an order.
#[tool(side_effect = "write", key = [order_id])]
async fn refund(order_id: String, amount: u64) -> Result<u64, ToolError> {
    let _ = order_id;
    Ok(amount)
}

/// Look an order up.
#[tool]
async fn lookup(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

/// Confirm an order to its customer, through the outbox.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id])]
async fn confirm(ctx: &Ctx, order_id: String) -> Result<String, ToolError> {
    ctx.enqueue(&json!({ "order_id": order_id }))?;
    Ok(order_id)
}

/// The most statements, and commits, a write call may send: the claim, which counts its turn
/// (`begin_turn_and_claim`), and the success with its audit record.
const WRITE_STATEMENTS: u64 = 2;
/// The statements of each write of a turn of several: its claim and its success.
const EACH_WRITE_STATEMENTS: u64 = 2;
/// The most statements a read call may send on its path: the turn's counters. Its audit record
/// is written after the turn answers, with those of the turn's other reads, in one statement.
const READ_STATEMENTS: u64 = 1;
/// The most statements, and commits, a write call of an unshared run may send: the claim, the
/// success with its audit record.
const UNSHARED_WRITE_STATEMENTS: u64 = 2;

struct Rig {
    proxy: CountingProxy,
    store: Arc<dyn OperationStore>,
    dispatcher: Dispatcher,
}

impl Rig {
    async fn new() -> Rig {
        let proxy = CountingProxy::start(&test_database().await).await;
        // One connection: every call reuses it, as a quiet pool's calls do.
        let store = PostgresStore::options(proxy.url())
            .max_connections(1)
            .connect()
            .await
            .expect("the store connects through the proxy");
        let store: Arc<dyn OperationStore> = Arc::new(store);
        let mut registry = Registry::new();
        registry.register::<refund>().unwrap();
        registry.register::<lookup>().unwrap();
        registry.register::<confirm>().unwrap();
        let dispatcher = Dispatcher::builder(registry).store(store.clone()).build();
        Rig {
            proxy,
            store,
            dispatcher,
        }
    }

    /// What `turn` cost on its path, with the statements it sent; then what writing the audit
    /// records of its reads cost after it.
    async fn cost(&self, session: &Session, turn: Vec<ToolCall>) -> (Tally, Vec<String>) {
        let (cost, sent, _) = self.costs(session, turn).await;
        (cost, sent)
    }

    /// What `turn` cost on its path, the statements it sent, and what writing the audit records
    /// of its reads cost after it. The test runs on one thread: the task that writes those
    /// records runs only once the turn has been counted.
    async fn costs(&self, session: &Session, turn: Vec<ToolCall>) -> (Tally, Vec<String>, Tally) {
        let before = self.proxy.tally();
        let logged = self.proxy.log().len();
        let reports = self
            .dispatcher
            .dispatch_turn(session, turn)
            .await
            .expect("the turn runs");
        for report in &reports {
            assert!(
                report.result.is_succeeded(),
                "{:?}",
                report.result.to_json()
            );
        }
        let cost = self.proxy.tally() - before;
        let sent = self.proxy.log()[logged..].to_vec();
        let before = self.proxy.tally();
        self.dispatcher.flush_audit().await;
        (cost, sent, self.proxy.tally() - before)
    }
}

fn refund_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "refund", json!({"order_id": order, "amount": 500}))
}

fn lookup_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "lookup", json!({"order_id": order}))
}

/// Every call of `session` once, so that the connection and its prepared statements are warm.
async fn warm(rig: &Rig, session: &Session) {
    for round in 0..2 {
        rig.cost(session, vec![refund_call("w", &format!("WARM-{round}"))])
            .await;
        rig.cost(session, vec![lookup_call("r", "WARM")]).await;
        let reads = (0..5)
            .map(|i| lookup_call(&format!("r{i}"), "WARM"))
            .collect();
        rig.cost(session, reads).await;
        let turn = (0..5)
            .map(|i| refund_call(&format!("t{i}"), &format!("WARM-{round}-{i}")))
            .collect();
        rig.cost(session, turn).await;
    }
}

#[tokio::test]
async fn calls_cost_the_store_no_more_round_trips_and_commits_than_budgeted() {
    let rig = Rig::new().await;
    let session = crate::support::session_in("run-costs");
    warm(&rig, &session).await;

    let (write, sent) = rig.cost(&session, vec![refund_call("w1", "ORD-1")]).await;
    println!("a write call: {write:?}\n  {}", sent.join("\n  "));
    let (read, sent_read, read_after) = rig.costs(&session, vec![lookup_call("r1", "ORD-1")]).await;
    println!(
        "a read call: {read:?}, its audit record after: {read_after:?}\n  {}",
        sent_read.join("\n  ")
    );
    let reads = (0..5)
        .map(|i| lookup_call(&format!("r{i}"), &format!("ORD-{i}")))
        .collect();
    let (five_reads, sent_five_reads, five_reads_after) = rig.costs(&session, reads).await;
    println!(
        "a turn of five reads: {five_reads:?}, their audit records after: {five_reads_after:?}\n  {}",
        sent_five_reads.join("\n  ")
    );
    let turn = (0..5)
        .map(|i| refund_call(&format!("t{i}"), &format!("ORD-T{i}")))
        .collect();
    let (five, sent_five) = rig.cost(&session, turn).await;
    println!(
        "a turn of five writes: {five:?}\n  {}",
        sent_five.join("\n  ")
    );

    assert!(
        write.statements <= WRITE_STATEMENTS && write.commits <= WRITE_STATEMENTS,
        "a write call sent {write:?}, more than {WRITE_STATEMENTS} statements or commits:\n  {}",
        sent.join("\n  ")
    );
    assert!(
        read.statements <= READ_STATEMENTS,
        "a read call sent {read:?}, more than {READ_STATEMENTS} statements:\n  {}",
        sent_read.join("\n  ")
    );
    // A turn's reads cost what one read costs on their path, and one statement after it.
    assert!(
        five_reads.statements <= READ_STATEMENTS,
        "a turn of five reads sent {five_reads:?}:\n  {}",
        sent_five_reads.join("\n  ")
    );
    for (what, after) in [("a read", read_after), ("five reads", five_reads_after)] {
        assert_eq!(
            (after.statements, after.commits),
            (1, 1),
            "the audit records of {what} cost {after:?} after the turn"
        );
    }
    // No round trip carries no statement: nothing checks a connection lent or taken back.
    for (what, cost) in [
        ("a write call", write),
        ("a read call", read),
        ("five reads", five_reads),
        ("five writes", five),
    ] {
        assert_eq!(
            cost.round_trips, cost.statements,
            "{what} cost {cost:?}: a round trip without a statement"
        );
    }
    // A turn's counters once, then each write's claim and success.
    assert!(
        five.statements <= 1 + 5 * EACH_WRITE_STATEMENTS,
        "a turn of five writes sent {five:?}:\n  {}",
        sent_five.join("\n  ")
    );
}

#[tokio::test]
async fn an_unshared_run_asks_the_store_nothing_for_its_counters() {
    let rig = Rig::new().await;
    let session = crate::support::session_in("run-unshared").unshared();
    warm(&rig, &session).await;

    let (write, sent) = rig.cost(&session, vec![refund_call("w1", "ORD-1")]).await;
    println!("an unshared write call: {write:?}\n  {}", sent.join("\n  "));
    let (read, sent_read, read_after) = rig.costs(&session, vec![lookup_call("r1", "ORD-1")]).await;
    println!("an unshared read call: {read:?}, its audit record after: {read_after:?}");
    let reads = (0..5)
        .map(|i| lookup_call(&format!("r{i}"), &format!("ORD-{i}")))
        .collect();
    let (five_reads, _, five_reads_after) = rig.costs(&session, reads).await;
    println!("an unshared turn of five reads: {five_reads:?}, after: {five_reads_after:?}");
    let turn = (0..5)
        .map(|i| refund_call(&format!("t{i}"), &format!("ORD-T{i}")))
        .collect();
    let (five, sent_five) = rig.cost(&session, turn).await;
    println!("an unshared turn of five writes: {five:?}");

    assert!(
        write.round_trips <= UNSHARED_WRITE_STATEMENTS
            && write.commits <= UNSHARED_WRITE_STATEMENTS,
        "an unshared write call sent {write:?}:\n  {}",
        sent.join("\n  ")
    );
    for (what, cost) in [("a read", read), ("five reads", five_reads)] {
        assert_eq!(
            cost.round_trips,
            0,
            "{what} of an unshared run cost {cost:?} on its path:\n  {}",
            sent_read.join("\n  ")
        );
    }
    for (what, after) in [("a read", read_after), ("five reads", five_reads_after)] {
        assert_eq!(
            (after.statements, after.commits),
            (1, 1),
            "the audit records of {what} cost {after:?} after the turn"
        );
    }
    assert!(
        five.round_trips <= 5 * UNSHARED_WRITE_STATEMENTS,
        "an unshared turn of five writes sent {five:?}:\n  {}",
        sent_five.join("\n  ")
    );
    // The run's counters never reached the store.
    assert!(
        sent.iter()
            .chain(&sent_five)
            .all(|sql| !sql.contains("toolgate_begin_turn")),
        "an unshared run's turn asked the store for its counters"
    );
}

/// An outbox worker's drain of `n` due events costs one statement (one round trip, one commit)
/// an event, its settlement with its audit record, and two a drain: the lease that takes the
/// events and the one that finds none left.
#[tokio::test]
async fn an_outbox_delivery_is_settled_with_its_audit_record_in_one_statement() {
    let rig = Rig::new().await;
    let session = crate::support::session_in("run-outbox");
    let worker = OutboxWorker::builder(rig.store.clone())
        .deliver("confirm", |event: OutboxEvent| async move {
            Ok(json!({ "sent": event.key }))
        })
        .batch(16)
        .build()
        .expect("a worker");
    let mut queued = 0;
    let mut queue = async |n: usize| {
        let calls = (0..n)
            .map(|_| {
                queued += 1;
                ToolCall::new(
                    format!("c{queued}"),
                    "confirm",
                    json!({"order_id": format!("ORD-{queued}")}),
                )
            })
            .collect();
        let reports = rig.dispatcher.dispatch_turn(&session, calls).await.unwrap();
        for report in &reports {
            let result = report.result.to_json();
            assert_eq!(result["status"], "queued", "{result}");
        }
        rig.dispatcher.flush_audit().await;
    };
    // Warm: the worker's statements are prepared on the connection.
    queue(2).await;
    assert_eq!(worker.drain().await.unwrap().delivered, 2);
    for n in [1, 16] {
        queue(n).await;
        let before = rig.proxy.tally();
        let logged = rig.proxy.log().len();
        let report = worker.drain().await.expect("the drain");
        let cost = rig.proxy.tally() - before;
        let sent = rig.proxy.log()[logged..].to_vec();
        println!("a drain of {n} events: {cost:?}\n  {}", sent.join("\n  "));
        assert_eq!(report.delivered, n as u32, "{report:?}");
        let most = n as u64 + 2;
        assert!(
            cost.round_trips <= most && cost.statements <= most && cost.commits <= most,
            "a drain of {n} events cost {cost:?}, more than {most}:\n  {}",
            sent.join("\n  ")
        );
    }
    // Each delivery has its record, once.
    let records = rig
        .store
        .audit(AuditQuery {
            tenant: Some("acme"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let deliveries: Vec<_> = records
        .iter()
        .filter(|r| r.entry.kind == AuditKind::Delivery)
        .map(|r| (r.entry.key.clone().unwrap(), r.entry.outcome.clone()))
        .collect();
    assert_eq!(deliveries.len(), 19, "{deliveries:?}");
    assert!(deliveries.iter().all(|(_, outcome)| outcome == "delivered"));
    let mut keys: Vec<_> = deliveries.iter().map(|(key, _)| key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 19, "a delivery audited twice");
}
