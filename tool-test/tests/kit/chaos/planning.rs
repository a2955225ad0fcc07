//! Faults take exactly the requests planned for them, by route and by count, and the record
//! says what came, with each request's idempotency key.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};
use toolgate_test::chaos::{Fault, FaultProxy, Route, Upstream as Reached};

use super::client::{post, request, send};
use super::upstream::Upstream;

/// The status the client gets for a request that takes `fault`, or none.
fn status_of(fault: Option<Fault>) -> StatusCode {
    match fault {
        None => StatusCode::OK,
        Some(Fault::Unavailable) => StatusCode::SERVICE_UNAVAILABLE,
        Some(Fault::RateLimited { .. }) => StatusCode::TOO_MANY_REQUESTS,
        Some(other) => panic!("this test plans no {other:?}"),
    }
}

#[tokio::test]
async fn a_fault_for_the_second_request_leaves_the_first_and_third_alone() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    proxy
        .plan()
        .at(Route::post("/refunds"), [2], Fault::Unavailable);
    let mut statuses = Vec::new();
    for key in ["k1", "k2", "k3"] {
        let answer = send(proxy.addr(), post("/refunds", key, "{}"), None).await;
        statuses.push(answer.answer().status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::OK
        ]
    );
    assert_eq!(upstream.keys(), ["k1", "k3"]);
}

#[tokio::test]
async fn the_next_requests_of_a_route_take_the_faults_in_the_order_planned() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    let refunds = Route::any("/refunds");
    let rate_limited = Fault::RateLimited {
        retry_after: Duration::from_secs(1),
    };
    proxy
        .plan()
        .next(refunds.clone(), 2, Fault::Unavailable)
        .next(refunds.clone(), 1, rate_limited);
    let mut statuses = Vec::new();
    for (n, method) in [Method::POST, Method::GET, Method::POST, Method::DELETE]
        .into_iter()
        .enumerate()
    {
        let key = format!("k{n}");
        let target = format!("/refunds/re_{n}");
        let answer = send(proxy.addr(), request(method, &target, Some(&key), ""), None).await;
        statuses.push(answer.answer().status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::OK
        ]
    );
    assert_eq!(upstream.keys(), ["k3"]);
}

/// A fixed-seed stream of requests over three routes against a plan on each: every request
/// takes the fault the plan holds for its number on its route and no other, the provider sees
/// exactly the requests without one, and the record counts and keys every request by route.
#[tokio::test]
async fn a_seeded_stream_of_requests_takes_exactly_the_planned_faults() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    let rate_limited = Fault::RateLimited {
        retry_after: Duration::from_secs(2),
    };
    let routes = [
        (Method::POST, "/refunds", Route::post("/refunds")),
        (Method::GET, "/refunds/re_1", Route::get("/refunds")),
        (Method::POST, "/orders/ORD-1/notes", Route::any("/orders")),
    ];
    let planned: BTreeMap<(usize, u64), Fault> = [
        ((0, 2), Fault::Unavailable),
        ((0, 3), Fault::Unavailable),
        ((0, 7), rate_limited),
        ((1, 1), rate_limited),
        ((1, 5), Fault::Unavailable),
        ((2, 4), Fault::Unavailable),
        ((2, 5), rate_limited),
        ((2, 6), Fault::Unavailable),
    ]
    .into_iter()
    .collect();
    for (&(route, number), &fault) in &planned {
        proxy.plan().at(routes[route].2.clone(), [number], fault);
    }

    let mut rng = XorShift(0x5eed_cafe_f00d_0001);
    let mut seen = [0u64; 3];
    let mut expected_keys: [Vec<String>; 3] = Default::default();
    let mut expected_upstream = Vec::new();
    for n in 0..48 {
        let route = usize::try_from(rng.next() % 3).unwrap();
        let (method, target, _) = &routes[route];
        seen[route] += 1;
        let key = format!("k{n}");
        let fault = planned.get(&(route, seen[route])).copied();
        let answer = send(
            proxy.addr(),
            request(method.clone(), target, Some(&key), "{}"),
            None,
        )
        .await
        .answer();
        assert_eq!(
            answer.status(),
            status_of(fault),
            "request {n}, number {} of {}",
            seen[route],
            routes[route].2
        );
        if fault.is_none() {
            expected_upstream.push(key.clone());
        }
        expected_keys[route].push(key);
    }
    for &(route, number) in planned.keys() {
        assert!(
            seen[route] >= number,
            "the seed reaches every planned number: {seen:?}"
        );
    }
    assert_eq!(upstream.keys(), expected_upstream);
    for (route, (_, _, planned_route)) in routes.iter().enumerate() {
        assert_eq!(
            proxy.plan().count(planned_route),
            usize::try_from(seen[route]).unwrap()
        );
        assert_eq!(proxy.plan().keys(planned_route), expected_keys[route]);
    }
    let faulted = proxy
        .plan()
        .requests()
        .iter()
        .filter(|record| record.fault.is_some())
        .inspect(|record| assert_eq!(record.upstream, Reached::NotSent, "{record:?}"))
        .count();
    assert_eq!(faulted, planned.len());
}

/// Keys are read from the header the proxy was told, recorded with repeats, and a request
/// without one is counted without a key.
#[tokio::test]
async fn the_record_keeps_each_request_s_key_from_the_header_named() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::builder(upstream.addr())
        .key_header(HeaderName::from_static("x-request-key"))
        .start()
        .await
        .unwrap();
    let refunds = Route::post("/refunds");
    for key in [Some("a"), Some("a"), None, Some("b")] {
        let mut request = request(Method::POST, "/refunds", None, "{}");
        if let Some(key) = key {
            request
                .headers_mut()
                .insert("x-request-key", key.parse().unwrap());
        }
        request
            .headers_mut()
            .insert("idempotency-key", "not-this-one".parse().unwrap());
        let answer = send(proxy.addr(), request, None).await;
        assert_eq!(answer.answer().status(), StatusCode::OK);
    }
    assert_eq!(proxy.plan().keys(&refunds), ["a", "a", "b"]);
    assert_eq!(proxy.plan().count(&refunds), 4);
    let records = proxy.plan().requests();
    assert_eq!(records[2].key, None);
    assert_eq!(records[3].method, Method::POST);
    assert_eq!(records[3].path, "/refunds");
}

/// xorshift64: a fixed seed gives the same stream on every run and platform.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
