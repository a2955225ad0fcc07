//! Stopping the proxy closes its port and every connection it holds, whether it is shut down
//! or dropped.

use std::time::Duration;

use http::StatusCode;
use toolgate_test::chaos::{Fault, FaultProxy, Route, Upstream as Reached};

use super::client::{Outcome, post, send};
use super::patiently;
use super::upstream::Upstream;

/// A proxy holding a dropped answer's connection, and the client waiting on it (with a
/// deadline far past the test's patience).
async fn a_held_client(upstream: &Upstream) -> (FaultProxy, tokio::task::JoinHandle<Outcome>) {
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    proxy
        .plan()
        .next(Route::post("/refunds"), 1, Fault::DropAfterApply);
    let client = tokio::spawn(send(
        proxy.addr(),
        post("/refunds", "k1", "{}"),
        Some(Duration::from_secs(3600)),
    ));
    patiently(proxy.plan().wait_for(|records| {
        records.first().map(|record| record.upstream) == Some(Reached::Answered(StatusCode::OK))
    }))
    .await;
    (proxy, client)
}

#[tokio::test]
async fn shutdown_closes_the_port_and_the_connections_it_holds() {
    let upstream = Upstream::start().await;
    let (proxy, client) = a_held_client(&upstream).await;
    let addr = proxy.addr();
    patiently(proxy.shutdown()).await;
    let outcome = patiently(client).await.unwrap();
    assert!(matches!(outcome, Outcome::Broke(_)), "{outcome:?}");
    let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn a_dropped_proxy_closes_the_connections_it_holds() {
    let upstream = Upstream::start().await;
    let (proxy, client) = a_held_client(&upstream).await;
    drop(proxy);
    let outcome = patiently(client).await.unwrap();
    assert!(matches!(outcome, Outcome::Broke(_)), "{outcome:?}");
}
