//! Each fault of the proxy, on a request to a real provider: what the client gets, what the
//! provider applied, and what the record says.

use std::time::Duration;

use http::{Method, StatusCode};
use toolgate_test::chaos::{Fault, FaultProxy, Route, Upstream as Reached};

use super::client::{Outcome, post, request, send, send_until};
use super::patiently;
use super::upstream::Upstream;

/// The client's own deadline, in the tests where the proxy withholds an answer.
const DEADLINE: Duration = Duration::from_millis(500);

/// A client's deadline that starts once the provider has answered the request at `index` of
/// the proxy's record: by then the answer would have reached a client the proxy passed it to.
async fn deadline_after_the_answer(proxy: &FaultProxy, index: usize, deadline: Duration) {
    let answered = |records: &[toolgate_test::chaos::Record]| {
        records
            .get(index)
            .is_some_and(|record| record.upstream == Reached::Answered(StatusCode::OK))
    };
    patiently(proxy.plan().wait_for(answered)).await;
    tokio::time::sleep(deadline).await;
}

async fn proxy_with(fault: Fault) -> (Upstream, FaultProxy) {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    proxy.plan().next(Route::post("/refunds"), 1, fault);
    (upstream, proxy)
}

/// The request after a refused one goes through: the provider is reachable, so the refused
/// one would have reached it had the proxy forwarded it.
async fn the_next_request_goes_through(upstream: &Upstream, proxy: &FaultProxy) {
    let next = send(proxy.addr(), post("/refunds", "k2", "{}"), None).await;
    assert_eq!(next.answer().status(), StatusCode::OK);
    assert_eq!(
        upstream.keys(),
        ["k2"],
        "only the request after the refusal"
    );
}

#[tokio::test]
async fn unavailable_answers_503_and_the_provider_sees_nothing() {
    let (upstream, proxy) = proxy_with(Fault::Unavailable).await;
    let answer = send(proxy.addr(), post("/refunds", "k1", "{}"), None)
        .await
        .answer();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(upstream.ledger().is_empty());
    the_next_request_goes_through(&upstream, &proxy).await;
    let records = proxy.plan().requests();
    assert_eq!(records[0].fault, Some(Fault::Unavailable));
    assert_eq!(records[0].upstream, Reached::NotSent);
    assert_eq!(records[1].upstream, Reached::Answered(StatusCode::OK));
}

#[tokio::test]
async fn rate_limited_answers_429_with_whole_seconds_and_the_provider_sees_nothing() {
    let retry_after = Duration::from_millis(2200);
    let (upstream, proxy) = proxy_with(Fault::RateLimited { retry_after }).await;
    let answer = send(proxy.addr(), post("/refunds", "k1", "{}"), None)
        .await
        .answer();
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers()["retry-after"], "3", "2.2 s rounded up");
    assert!(upstream.ledger().is_empty());
    the_next_request_goes_through(&upstream, &proxy).await;
    assert_eq!(proxy.plan().requests()[0].upstream, Reached::NotSent);
}

/// The provider applies the request and answers; the proxy keeps the answer and the connection
/// open, and the client's own deadline ends the wait.
#[tokio::test]
async fn drop_after_apply_applies_once_and_the_client_times_out() {
    let (upstream, proxy) = proxy_with(Fault::DropAfterApply).await;
    let outcome = send_until(
        proxy.addr(),
        post("/refunds", "k1", "{}"),
        deadline_after_the_answer(&proxy, 0, DEADLINE),
    )
    .await;
    assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
    assert_eq!(upstream.applied_under("k1"), 1);
    assert_eq!(
        proxy.plan().requests()[0].fault,
        Some(Fault::DropAfterApply)
    );
    // The retry under the same key reaches the provider, which sees the key a second time.
    let retry = send(proxy.addr(), post("/refunds", "k1", "{}"), Some(DEADLINE)).await;
    assert_eq!(retry.answer().status(), StatusCode::OK);
    assert_eq!(upstream.applied_under("k1"), 2);
}

/// However long the client waits, the proxy does not answer: only the client's closing ends a
/// dropped answer's connection, never a timer of the proxy's.
#[tokio::test]
async fn drop_after_apply_holds_the_connection_as_long_as_the_client_waits() {
    let (upstream, proxy) = proxy_with(Fault::DropAfterApply).await;
    proxy
        .plan()
        .next(Route::post("/refunds"), 1, Fault::DropAfterApply);
    let deadlines = [Duration::from_millis(50), Duration::from_millis(1500)];
    for (index, deadline) in deadlines.into_iter().enumerate() {
        let give_up = deadline_after_the_answer(&proxy, index, deadline);
        let outcome = send_until(proxy.addr(), post("/refunds", "k1", "{}"), give_up).await;
        assert!(
            matches!(outcome, Outcome::TimedOut),
            "{deadline:?}: {outcome:?}"
        );
    }
    assert_eq!(upstream.applied_under("k1"), 2);
}

/// The provider applies the request; the client's connection is then reset: a TCP `RST`, which
/// the client reads as "connection reset by peer", not as an orderly end.
#[tokio::test]
async fn reset_after_apply_applies_once_and_resets_the_client() {
    let (upstream, proxy) = proxy_with(Fault::ResetAfterApply).await;
    let outcome = patiently(send(proxy.addr(), post("/refunds", "k1", "{}"), None)).await;
    assert!(outcome.is_reset(), "{outcome:?}");
    patiently(
        proxy
            .plan()
            .wait_for(|records| records[0].upstream == Reached::Answered(StatusCode::OK)),
    )
    .await;
    assert_eq!(upstream.applied_under("k1"), 1);
    assert_eq!(
        proxy.plan().requests()[0].fault,
        Some(Fault::ResetAfterApply)
    );
    the_next_request_after_a_reset_goes_through(&upstream, &proxy).await;
}

async fn the_next_request_after_a_reset_goes_through(upstream: &Upstream, proxy: &FaultProxy) {
    let next = send(proxy.addr(), post("/refunds", "k1", "{}"), None).await;
    assert_eq!(next.answer().status(), StatusCode::OK);
    assert_eq!(upstream.applied_under("k1"), 2);
}

/// On tokio's paused clock: the proxy's delay is the only timer, so the clock moves by exactly
/// the delay, and the request is then forwarded and answered.
#[tokio::test(start_paused = true)]
async fn delay_forwards_after_the_delay() {
    let delay = Duration::from_secs(45);
    let (upstream, proxy) = proxy_with(Fault::Delay(delay)).await;
    let started = tokio::time::Instant::now();
    let answer = send(proxy.addr(), post("/refunds", "k1", "{}"), None)
        .await
        .answer();
    let waited = started.elapsed();
    assert_eq!(answer.status(), StatusCode::OK);
    assert!(
        waited >= delay && waited < delay + Duration::from_secs(1),
        "{waited:?}"
    );
    assert_eq!(upstream.applied_under("k1"), 1);
    let record = &proxy.plan().requests()[0];
    assert_eq!(record.fault, Some(Fault::Delay(delay)));
    assert_eq!(record.upstream, Reached::Answered(StatusCode::OK));
}

/// A client that gives up while its request waits out a delay sent nothing: the proxy drops
/// the request with the connection, and the record says it was abandoned.
#[tokio::test]
async fn a_client_that_gives_up_during_a_delay_sent_nothing() {
    let (upstream, proxy) = proxy_with(Fault::Delay(Duration::from_secs(3600))).await;
    let waiting = proxy.plan().wait_for(|records| !records.is_empty());
    let outcome = send_until(proxy.addr(), post("/refunds", "k1", "{}"), waiting).await;
    assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
    patiently(
        proxy
            .plan()
            .wait_for(|records| records[0].upstream == Reached::Abandoned),
    )
    .await;
    assert!(upstream.ledger().is_empty());
    the_next_request_goes_through(&upstream, &proxy).await;
}

/// A provider that cannot be reached is answered `502`, and the record says it failed.
#[tokio::test]
async fn an_unreachable_provider_is_a_bad_gateway() {
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gone.local_addr().unwrap();
    drop(gone);
    let proxy = FaultProxy::start(addr).await.unwrap();
    let answer = send(
        proxy.addr(),
        request(Method::GET, "/orders/1", None, ""),
        None,
    )
    .await
    .answer();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(proxy.plan().requests()[0].upstream, Reached::Failed);
}
