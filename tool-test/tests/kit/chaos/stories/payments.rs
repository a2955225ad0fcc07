//! A payment provider on loopback that the stories' refund tools reach through the fault
//! proxy. `POST /refunds` with `{"order_id": …}` applies a refund, unless its `Idempotency-Key`
//! names a refund already applied, which it answers again; `GET /refunds?key=K` answers the
//! refund applied under `K`, or `404`. Its ledger is the authoritative state the invariants
//! are checked against.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use toolgate_test::chaos::Applied;

/// One refund applied.
#[derive(Debug, Clone)]
struct Refund {
    id: String,
    order_id: String,
    key: Option<String>,
}

impl Refund {
    fn json(&self) -> Value {
        json!({"refund_id": self.id, "order_id": self.order_id})
    }
}

type Ledger = Arc<Mutex<Vec<Refund>>>;

/// The provider, serving on a loopback port until it is dropped.
pub(crate) struct Payments {
    addr: SocketAddr,
    ledger: Ledger,
    serving: JoinHandle<()>,
}

impl Payments {
    pub(crate) async fn start() -> Payments {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ledger = Ledger::default();
        let serving = tokio::spawn(serve(listener, ledger.clone()));
        Payments {
            addr,
            ledger,
            serving,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every refund applied, as the invariants read them: `refund ORD-…`, under its key.
    pub(crate) fn applied(&self) -> Vec<Applied> {
        self.ledger
            .lock()
            .unwrap()
            .iter()
            .map(|refund| Applied::new(format!("refund {}", refund.order_id), refund.key.clone()))
            .collect()
    }
}

impl Drop for Payments {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

async fn serve(listener: TcpListener, ledger: Ledger) {
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, ledger.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    ledger: Ledger,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|body| body.to_bytes()) else {
        return Ok(reply(StatusCode::BAD_REQUEST, &json!({"error": "body"})));
    };
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
        .map(str::to_owned);
    let mut ledger = ledger.lock().unwrap();
    Ok(match (parts.method, parts.uri.path()) {
        (Method::POST, "/refunds") => {
            let Some(order_id) = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|body| body["order_id"].as_str().map(str::to_owned))
            else {
                return Ok(reply(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": "order_id"}),
                ));
            };
            let earlier = key.as_ref().and_then(|key| {
                ledger
                    .iter()
                    .find(|refund| refund.key.as_ref() == Some(key))
            });
            match earlier {
                Some(refund) => reply(StatusCode::OK, &refund.json()),
                None => {
                    let refund = Refund {
                        id: format!("re_{}", ledger.len() + 1),
                        order_id,
                        key,
                    };
                    ledger.push(refund.clone());
                    reply(StatusCode::OK, &refund.json())
                }
            }
        }
        (Method::GET, "/refunds") => {
            let wanted = parts
                .uri
                .query()
                .and_then(|query| query.strip_prefix("key="));
            let found = wanted.and_then(|wanted| {
                ledger
                    .iter()
                    .find(|refund| refund.key.as_deref() == Some(wanted))
            });
            match found {
                Some(refund) => reply(StatusCode::OK, &refund.json()),
                None => reply(StatusCode::NOT_FOUND, &json!({"error": "no refund"})),
            }
        }
        _ => reply(StatusCode::NOT_FOUND, &json!({"error": "no route"})),
    })
}

fn reply(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
