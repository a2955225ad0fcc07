//! A client that cancels a call, or goes away, stops the server waiting for it, never the call:
//! a write in flight runs to its end and is recorded, the same call again answers its outcome,
//! and the server stops serving only once the calls it started have ended.
//!
//! The write waits at a gate the test opens; where a wait matters the clock is paused, so that
//! it ends only once nothing else can move.

use crate::common;

use std::time::Duration;

use common::{PATIENCE, Shop, call, connect, result_object, server, session};
use rmcp::model::{CallToolRequest, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use tokio::time::timeout;
use toolgate::mcp::StdioSession;

fn refund() -> rmcp::model::CallToolRequestParams {
    call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}))
}

#[tokio::test]
async fn a_cancelled_write_runs_to_its_end_and_the_same_call_answers_its_outcome() {
    let shop = Shop::gated();
    let hook = StdioSession::from_session(session("acme", &["refund:create"]));
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();

    let request = ClientRequest::CallToolRequest(CallToolRequest::new(refund()));
    let handle = client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    timeout(PATIENCE, shop.entered.notified())
        .await
        .expect("the refund started");
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .unwrap();
    // A round trip after the cancellation: the server has read it before this answer.
    client.list_all_tools().await.unwrap();
    assert_eq!(shop.refunds(), 0, "the refund still waits at its gate");

    // The same call again finds the refund running and waits for its outcome.
    let peer = client.peer().clone();
    let again = tokio::spawn(async move { peer.call_tool(refund()).await });
    shop.release();
    let again = timeout(PATIENCE, again).await.unwrap().unwrap().unwrap();
    let again = result_object(&again);
    assert_eq!(again["status"], "succeeded");
    assert_eq!(again["replayed"], true);
    assert_eq!(again["data"]["refund"], "re_1");
    assert_eq!(shop.refunds(), 1);
}

#[tokio::test(start_paused = true)]
async fn serving_ends_only_once_the_calls_in_flight_have_ended() {
    let shop = Shop::gated();
    let hook = StdioSession::from_session(session("acme", &["refund:create"]));
    let (client, mut serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();
    let peer = client.peer().clone();
    let _call = tokio::spawn(async move { peer.call_tool(refund()).await });
    timeout(PATIENCE, shop.entered.notified())
        .await
        .expect("the refund started");

    client.cancel().await.unwrap();
    // The clock is paused: this wait ends only once nothing else can move, so a server that
    // returned with the refund still at its gate would have returned by then.
    let early = timeout(Duration::from_secs(3600), &mut serving).await;
    assert!(
        early.is_err(),
        "serving ended with a write in flight: {early:?}"
    );
    assert_eq!(shop.refunds(), 0);

    shop.release();
    timeout(PATIENCE, serving)
        .await
        .expect("serving ends once the refund has")
        .unwrap()
        .unwrap();
    assert_eq!(shop.refunds(), 1);
}
