//! A server that cannot be reached: the store waits a bounded time for a connection, then
//! answers `StoreError::Unreachable` (a transient fault), not sqlx's 30 seconds and a backend
//! error. The "server" is a socket that accepts connections and never says a word, so no
//! PostgreSQL is needed; tokio's paused clock measures the wait without waiting it.

use std::net::TcpListener;
use std::time::Duration;

use toolgate_core::store::prelude::*;

use toolgate_core::store::ClaimRequest;
use toolgate_store_postgres::{DEFAULT_ACQUIRE_TIMEOUT, PostgresStore};

/// A listener that accepts every connection and keeps it open, silent. Answers its URL.
fn silent_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            match stream {
                Ok(stream) => held.push(stream),
                Err(_) => break,
            }
        }
    });
    format!("postgres://toolgate:toolgate@127.0.0.1:{port}/toolgate")
}

/// sqlx reckons its acquire deadline on the real clock and sleeps for what is left of it, so
/// the paused clock sees a wait up to a few real milliseconds short of the timeout.
const REAL_TIME_SLACK: Duration = Duration::from_millis(50);

#[tokio::test(start_paused = true)]
async fn connecting_gives_up_after_the_default_acquire_timeout() {
    let url = silent_server();
    let started = tokio::time::Instant::now();
    let err = PostgresStore::connect(&url)
        .await
        .expect_err("nothing answers");
    let waited = started.elapsed();
    assert!(err.is_unreachable(), "{err:?}");
    assert!(
        std::error::Error::source(&err).is_some(),
        "sqlx's error is kept as the source"
    );
    assert_eq!(DEFAULT_ACQUIRE_TIMEOUT, Duration::from_secs(3));
    assert!(
        waited + REAL_TIME_SLACK >= DEFAULT_ACQUIRE_TIMEOUT && waited < DEFAULT_ACQUIRE_TIMEOUT * 2,
        "waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_gives_up_after_the_configured_acquire_timeout() {
    let url = silent_server();
    let options = PostgresStore::options(&url).acquire_timeout(Duration::from_millis(700));
    let pool = options
        .pool_options()
        .connect_lazy(&url)
        .expect("a lazy pool");
    let store = PostgresStore::from_pool(pool);
    let started = tokio::time::Instant::now();
    let err = store
        .claim(ClaimRequest {
            tenant: "acme",
            key: "k",
            tool: "issue_refund",
            request_hash: "h",
            unkeyed: None,
            arguments: "{}",
            now_ms: 0,
            lease: Duration::from_secs(30),
            takeover: false,
            approval: None,
        })
        .await
        .expect_err("nothing answers");
    let waited = started.elapsed();
    assert!(err.is_unreachable(), "{err:?}");
    assert!(
        waited + REAL_TIME_SLACK >= Duration::from_millis(700)
            && waited < Duration::from_millis(1400),
        "waited {waited:?}"
    );
}
