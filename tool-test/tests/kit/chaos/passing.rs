//! What no fault is planned for passes through: the request's method, target, headers and body
//! reach the provider unchanged but for the hop-by-hop headers, and the provider's status,
//! headers and body reach the client the same way. Bodies over the proxy's limit are refused.

use http::{Method, StatusCode};
use toolgate_test::chaos::{Fault, FaultProxy, Route, Upstream as Reached};

use super::client::{post, request, send};
use super::upstream::Upstream;

#[tokio::test]
async fn an_unplanned_request_and_its_answer_pass_through_unchanged() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    proxy
        .plan()
        .next(Route::post("/refunds"), 5, Fault::Unavailable);
    // Not valid UTF-8, and with a NUL: bytes, not text.
    let body = [0xff_u8, 0x00, 0xfe, b'{', b'}', 0x80];
    let mut sent = request(Method::PUT, "/notes/n_1?draft=true&x=%2F", Some("k1"), "");
    *sent.body_mut() = hyper::body::Bytes::copy_from_slice(&body);
    for (name, value) in [
        ("content-type", "application/octet-stream"),
        ("authorization", "Bearer s3cret"),
        ("x-trace", "one"),
        ("x-trace", "two"),
        ("x-answer-status", "202"),
        ("connection", "x-hop"),
        ("x-hop", "for the proxy only"),
        ("keep-alive", "timeout=5"),
    ] {
        sent.headers_mut().append(name, value.parse().unwrap());
    }
    let answer = send(proxy.addr(), sent, None).await.answer();

    let ledger = upstream.ledger();
    assert_eq!(ledger.len(), 1);
    let applied = &ledger[0];
    assert_eq!(applied.method, Method::PUT);
    assert_eq!(applied.target, "/notes/n_1?draft=true&x=%2F");
    assert_eq!(applied.key.as_deref(), Some("k1"));
    assert_eq!(&applied.body[..], &body[..]);
    let header = |name: &str| -> Vec<&str> {
        applied
            .headers
            .get_all(name)
            .iter()
            .map(|value| value.to_str().unwrap())
            .collect()
    };
    assert_eq!(header("content-type"), ["application/octet-stream"]);
    assert_eq!(header("authorization"), ["Bearer s3cret"]);
    assert_eq!(header("x-trace"), ["one", "two"]);
    assert_eq!(header("content-length"), ["6"]);
    assert_eq!(header("host"), [upstream.addr().to_string().as_str()]);
    for hop in ["x-hop", "keep-alive"] {
        assert!(header(hop).is_empty(), "{hop} is the proxy's only");
    }

    assert_eq!(answer.status(), StatusCode::ACCEPTED);
    assert_eq!(answer.headers()["content-type"], "application/json");
    assert_eq!(answer.headers()["x-provider-seq"], "1");
    let traces: Vec<_> = answer
        .headers()
        .get_all("x-provider-trace")
        .iter()
        .collect();
    assert_eq!(traces, ["a", "b"]);
    let seen: serde_json::Value = serde_json::from_slice(answer.body()).unwrap();
    assert_eq!(seen["target"], "/notes/n_1?draft=true&x=%2F");
    assert_eq!(seen["key"], "k1");
    let record = &proxy.plan().requests()[0];
    assert_eq!(record.fault, None);
    assert_eq!(record.path, "/notes/n_1", "the record's path has no query");
    assert_eq!(record.upstream, Reached::Answered(StatusCode::ACCEPTED));
}

/// A body over the limit is refused with `413` and reaches neither the provider nor the
/// record; one of exactly the limit goes through.
#[tokio::test]
async fn a_body_over_the_limit_is_refused_and_one_at_the_limit_passes() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::builder(upstream.addr())
        .body_limit(1024)
        .start()
        .await
        .unwrap();
    let over = send(
        proxy.addr(),
        post("/refunds", "k1", &"x".repeat(1025)),
        None,
    )
    .await
    .answer();
    assert_eq!(over.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(upstream.ledger().is_empty());
    assert!(proxy.plan().requests().is_empty());

    let at = "y".repeat(1000);
    let at = format!("\"{at}{}\"", "z".repeat(1024 - at.len() - 2));
    assert_eq!(at.len(), 1024);
    let passed = send(proxy.addr(), post("/refunds", "k2", &at), None)
        .await
        .answer();
    assert_eq!(
        passed.status(),
        StatusCode::BAD_GATEWAY,
        "the echo is longer than the limit"
    );
    assert_eq!(upstream.keys(), ["k2"]);
    assert_eq!(upstream.ledger()[0].body.len(), 1024);
    // The provider applied it and answered: the record says so, though the client got a 502.
    assert_eq!(
        proxy.plan().requests()[0].upstream,
        Reached::Answered(StatusCode::OK)
    );
}
