//! The provider behind the proxy: it applies every request it receives (one line of its ledger
//! a request, counted under the request's idempotency key) and answers what it saw, as JSON.
//!
//! A request may ask for its answer's status with `x-answer-status`. Every answer carries two
//! headers of the provider's own (`x-provider-seq`, the request's line in the ledger, and two
//! `x-provider-trace` values), for the tests that the proxy passes answers on unchanged.

use std::convert::Infallible;
use std::net::SocketAddr;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One request the provider applied.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub(crate) method: Method,
    /// The path and the query.
    pub(crate) target: String,
    pub(crate) key: Option<String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// The provider, serving on a loopback port until it is dropped.
pub(crate) struct Upstream {
    addr: SocketAddr,
    ledger: watch::Sender<Vec<Applied>>,
    serving: JoinHandle<()>,
}

impl Upstream {
    pub(crate) async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ledger = watch::Sender::new(Vec::new());
        let serving = tokio::spawn(serve(listener, ledger.clone()));
        Upstream {
            addr,
            ledger,
            serving,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request applied, in order.
    pub(crate) fn ledger(&self) -> Vec<Applied> {
        self.ledger.borrow().clone()
    }

    /// How many requests were applied under `key`.
    pub(crate) fn applied_under(&self, key: &str) -> usize {
        self.ledger
            .borrow()
            .iter()
            .filter(|applied| applied.key.as_deref() == Some(key))
            .count()
    }

    /// The keys of the requests applied, in order (`-` for a request without one).
    pub(crate) fn keys(&self) -> Vec<String> {
        self.ledger
            .borrow()
            .iter()
            .map(|applied| applied.key.clone().unwrap_or_else(|| "-".to_owned()))
            .collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

async fn serve(listener: TcpListener, ledger: watch::Sender<Vec<Applied>>) {
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| apply(request, ledger.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn apply(
    request: Request<Incoming>,
    ledger: watch::Sender<Vec<Applied>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|body| body.to_bytes());
    let Ok(body) = body else {
        return Ok(answer(
            StatusCode::BAD_REQUEST,
            &json!({"error": "body"}),
            0,
        ));
    };
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
        .map(str::to_owned);
    let status = parts
        .headers
        .get("x-answer-status")
        .and_then(|status| status.to_str().ok()?.parse::<u16>().ok())
        .and_then(|status| StatusCode::from_u16(status).ok())
        .unwrap_or(StatusCode::OK);
    let applied = Applied {
        method: parts.method,
        target: parts.uri.to_string(),
        key,
        headers: parts.headers,
        body,
    };
    let mut seq = 0;
    ledger.send_modify(|ledger| {
        ledger.push(applied.clone());
        seq = ledger.len();
    });
    let under_key = ledger
        .borrow()
        .iter()
        .filter(|earlier| earlier.key.is_some() && earlier.key == applied.key)
        .count();
    let seen = json!({
        "method": applied.method.as_str(),
        "target": applied.target,
        "key": applied.key,
        "applied_under_key": under_key,
        "body": String::from_utf8_lossy(&applied.body),
    });
    Ok(answer(status, &seen, seq))
}

fn answer(status: StatusCode, body: &serde_json::Value, seq: usize) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("x-provider-seq", HeaderValue::from(seq));
    headers.append("x-provider-trace", HeaderValue::from_static("a"));
    headers.append("x-provider-trace", HeaderValue::from_static("b"));
    response
}
