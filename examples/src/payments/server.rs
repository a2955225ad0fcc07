//! The fake payment provider's HTTP server: the routes of the table in [`crate::payments`] over
//! [`FakeProvider`], with the shop's orders.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate::{ErrorKind, ToolError};

use crate::fake_provider::{FakeProvider, Fault, KeyMode, Operation, Refund};
use crate::shop::{ORDERS, OrderState, Receipt, money, over_balance, unknown_order};

/// The largest request body the provider reads.
const MAX_BODY: usize = 64 * 1024;

/// Called with each new refund once it is in the ledger, before the answer.
pub type OnApplied = Box<dyn Fn(&Receipt) + Send + Sync>;

/// The most requests one `fault` line may script: each is kept until a request takes it.
pub const MAX_FAULT_TIMES: u32 = 1000;

/// The longest a `slow` fault may hold a request, in milliseconds.
pub const MAX_FAULT_MS: u64 = 60_000;

/// A `fault` line of a refund desk script: the next `times` requests of `operation` misbehave.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultSpec {
    /// `refund`, `lookup`, `order`, `crm` or `notify`.
    operation: String,
    /// The order whose requests take the fault (a refund or an order read); any order when
    /// left out.
    order_id: Option<String>,
    /// `unavailable_before_apply`, `timeout_after_apply`, `reset_after_apply` or `slow`.
    kind: String,
    /// How many requests, 1 when left out; at most [`MAX_FAULT_TIMES`].
    #[serde(default = "one")]
    times: u64,
    /// How long a `slow` request waits before it is served; at most [`MAX_FAULT_MS`].
    ms: Option<u64>,
}

fn one() -> u64 {
    1
}

impl FaultSpec {
    fn parse(self) -> Result<(Operation, Option<String>, Fault, u32), String> {
        let operation = match self.operation.as_str() {
            "refund" => Operation::Refund,
            "lookup" => Operation::Lookup,
            "order" => Operation::Order,
            "crm" => Operation::Crm,
            "notify" => Operation::Notify,
            other => {
                return Err(format!(
                    "unknown operation `{other}`: faults apply to `refund`, `lookup`, `order`, \
                     `crm` or `notify`"
                ));
            }
        };
        if operation == Operation::Lookup && self.order_id.is_some() {
            return Err(
                "a lookup asks for a key, not an order: a `lookup` fault takes no `order_id`"
                    .to_owned(),
            );
        }
        let fault = match self.kind.as_str() {
            "unavailable_before_apply" => Fault::UnavailableBeforeApply,
            "timeout_after_apply" => Fault::TimeoutAfterApply,
            "reset_after_apply" => Fault::ResetAfterApply,
            "slow" => match self.ms {
                Some(ms) if ms > MAX_FAULT_MS => {
                    return Err(format!(
                        "a `slow` fault waits at most {MAX_FAULT_MS} ms, not {ms}"
                    ));
                }
                Some(ms) => Fault::Slow(Duration::from_millis(ms)),
                None => return Err("a `slow` fault needs `ms`".to_owned()),
            },
            other => {
                return Err(format!(
                    "unknown fault kind `{other}`: use unavailable_before_apply, \
                     timeout_after_apply, reset_after_apply or slow"
                ));
            }
        };
        if self.ms.is_some() && !matches!(fault, Fault::Slow(_)) {
            return Err(format!(
                "only a `slow` fault takes `ms`, not `{}`",
                self.kind
            ));
        }
        let Some(times) = u32::try_from(self.times)
            .ok()
            .filter(|times| (1..=MAX_FAULT_TIMES).contains(times))
        else {
            return Err(format!(
                "`times` is between 1 and {MAX_FAULT_TIMES}, not {}",
                self.times
            ));
        };
        Ok((operation, self.order_id, fault, times))
    }
}

/// A desk script's `fault` object `spec`, as the provider reads it: the operation, the order
/// it is limited to, the fault and how many requests take it; or why the provider refuses it.
pub fn fault_line(spec: &Value) -> Result<(Operation, Option<String>, Fault, u32), String> {
    let spec: FaultSpec = serde_json::from_value(spec.clone()).map_err(|err| err.to_string())?;
    spec.parse()
}

/// The body of a refund request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundRequest {
    order_id: String,
    amount_cents: u64,
}

/// The body of a CRM update or a notification request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionRequest {
    order_id: String,
}

/// What a request handler answers: a response, or the connection dropped without one.
type Answer = Result<Response<Full<Bytes>>, ConnectionDropped>;

/// Makes the server drop the connection instead of answering: a reset after apply.
#[derive(Debug)]
struct ConnectionDropped;

impl std::fmt::Display for ConnectionDropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the fake provider dropped the connection, as told to")
    }
}

impl std::error::Error for ConnectionDropped {}

/// The fake payment provider: a [`FakeProvider`] that honours idempotency keys, and the shop's
/// orders.
#[derive(Debug)]
pub struct PaymentsServer {
    provider: FakeProvider,
}

impl PaymentsServer {
    /// A provider with its ledger at `ledger` (created if missing, continued if not). `on_applied`
    /// is called with each new refund once it is in the ledger, before the answer.
    pub fn open(ledger: impl Into<PathBuf>, on_applied: Option<OnApplied>) -> io::Result<Self> {
        let mut provider = FakeProvider::open(ledger, KeyMode::Honours)?;
        if let Some(hook) = on_applied {
            provider = provider.on_applied(move |refund| hook(&receipt(refund)));
        }
        Ok(PaymentsServer { provider })
    }

    /// Serves HTTP on `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(err) => {
                    eprintln!("fake payments: accept failed: {err}");
                    continue;
                }
            };
            let server = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let server = server.clone();
                    async move { server.handle(request).await }
                });
                // The connection ends with an error when the provider drops it on purpose or the
                // client gives up; neither is the server's fault.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// Starts the provider on an ephemeral loopback port, on the current runtime.
    pub async fn spawn(self) -> io::Result<SocketAddr> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(Arc::new(self).serve(listener));
        Ok(addr)
    }

    async fn handle(&self, request: Request<Incoming>) -> Answer {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        // Split first, then decode: an escaped `/` is part of a segment, never a route.
        let decoded: Result<Vec<_>, _> = path
            .trim_matches('/')
            .split('/')
            .map(|segment| percent_decode_str(segment).decode_utf8())
            .collect();
        let Ok(decoded) = decoded else {
            return Ok(error(
                StatusCode::BAD_REQUEST,
                "a path segment is not UTF-8 once percent-decoded",
            ));
        };
        let segments: Vec<&str> = decoded.iter().map(AsRef::as_ref).collect();
        match (&method, segments.as_slice()) {
            (&Method::GET, ["orders", order_id]) => self.order(order_id).await,
            (&Method::POST, ["refunds"]) => self.refund(request).await,
            (&Method::GET, ["refunds", key]) => self.lookup(key).await,
            (&Method::POST, ["crm"]) => self.act(Operation::Crm, request).await,
            (&Method::POST, ["notifications"]) => self.act(Operation::Notify, request).await,
            (&Method::POST, ["faults"]) => Ok(self.fault(request).await),
            (&Method::GET, ["ledger"]) => Ok(self.ledger()),
            _ => Ok(error(
                StatusCode::NOT_FOUND,
                &format!("no route {method} {path}"),
            )),
        }
    }

    async fn order(&self, order_id: &str) -> Answer {
        let read = self
            .provider
            .read_order(order_id, |refunds| order_state(order_id, refunds))
            .await;
        match read {
            Ok(Some(order)) => Ok(ok(&order)),
            Ok(None) => Ok(error(
                StatusCode::NOT_FOUND,
                &format!("no order {order_id}"),
            )),
            Err(err) => tool_error(&err),
        }
    }

    async fn refund(&self, request: Request<Incoming>) -> Answer {
        let Some(key) = idempotency_key(&request) else {
            return Ok(error(
                StatusCode::BAD_REQUEST,
                "a refund needs an Idempotency-Key header",
            ));
        };
        let body: RefundRequest = match read_json(request).await {
            Ok(body) => body,
            Err(answer) => return Ok(answer),
        };
        let Ok(amount_cents) = i64::try_from(body.amount_cents) else {
            return Ok(error(StatusCode::UNPROCESSABLE_ENTITY, "amount too large"));
        };
        let order_id = body.order_id.as_str();
        let answer = self
            .provider
            .refund_checked(&key, order_id, amount_cents, |refunds| {
                let order =
                    order_state(order_id, refunds).ok_or_else(|| unknown_order(order_id))?;
                if body.amount_cents > order.refundable_cents() {
                    return Err(over_balance(&order, body.amount_cents));
                }
                Ok(())
            })
            .await;
        match answer {
            Ok(refund) => Ok(ok(&receipt(&refund))),
            Err(err) => tool_error(&err),
        }
    }

    /// A CRM update or a notification about an order of the shop, under its idempotency key.
    async fn act(&self, operation: Operation, request: Request<Incoming>) -> Answer {
        let Some(key) = idempotency_key(&request) else {
            return Ok(error(
                StatusCode::BAD_REQUEST,
                "this request needs an Idempotency-Key header",
            ));
        };
        let body: ActionRequest = match read_json(request).await {
            Ok(body) => body,
            Err(answer) => return Ok(answer),
        };
        let order_id = body.order_id.as_str();
        let answer = self
            .provider
            .act(operation, &key, order_id, || {
                match ORDERS.iter().any(|(id, _, _)| *id == order_id) {
                    true => Ok(()),
                    false => Err(unknown_order(order_id)),
                }
            })
            .await;
        match answer {
            Ok(action) => Ok(ok(&action)),
            Err(err) => tool_error(&err),
        }
    }

    async fn lookup(&self, key: &str) -> Answer {
        match self.provider.lookup(key).await {
            Ok(Some(refund)) => Ok(ok(&receipt(&refund))),
            Ok(None) => Ok(error(
                StatusCode::NOT_FOUND,
                "no refund under that idempotency key",
            )),
            Err(err) => tool_error(&err),
        }
    }

    async fn fault(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let spec: FaultSpec = match read_json(request).await {
            Ok(spec) => spec,
            Err(answer) => return answer,
        };
        match spec.parse() {
            Ok((operation, order_id, fault, times)) => {
                match order_id {
                    Some(order_id) => self.provider.inject_for(operation, &order_id, fault, times),
                    None => self.provider.inject(operation, fault, times),
                }
                respond(StatusCode::NO_CONTENT, Bytes::new())
            }
            Err(message) => error(StatusCode::BAD_REQUEST, &message),
        }
    }

    fn ledger(&self) -> Response<Full<Bytes>> {
        let ledger = self.provider.with_ledger(|refunds| {
            let mut ledger = serde_json::Map::new();
            for (order_id, _, _) in ORDERS {
                let order = order_state(order_id, refunds).expect("the order is in the table");
                let count = refunds.iter().filter(|r| r.order_id == order_id).count();
                ledger.insert(
                    order_id.to_owned(),
                    json!({"refunded": money(order.refunded_cents), "refunds": count}),
                );
            }
            ledger
        });
        let mut crm = serde_json::Map::new();
        let mut notify = serde_json::Map::new();
        for action in self.provider.actions() {
            let per_order = if action.operation == "crm" {
                &mut crm
            } else {
                &mut notify
            };
            let count = per_order.entry(action.order_id).or_insert(json!(0));
            *count = json!(count.as_u64().unwrap_or(0) + 1);
        }
        ok(&json!({
            "ledger": ledger,
            "crm": crm,
            "notify": notify,
            "provider_requests": {
                "refund": self.provider.requests(Operation::Refund),
                "lookup": self.provider.requests(Operation::Lookup),
                "crm": self.provider.requests(Operation::Crm),
                "notify": self.provider.requests(Operation::Notify),
            },
        }))
    }
}

/// The `Idempotency-Key` header of `request`.
fn idempotency_key(request: &Request<Incoming>) -> Option<String> {
    request
        .headers()
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
        .map(str::to_owned)
}

/// The order `order_id` of the shop's table with the ledger's refunds added, or `None`.
fn order_state(order_id: &str, refunds: &[Refund]) -> Option<OrderState> {
    let (_, paid_cents, refunded_cents) = ORDERS.into_iter().find(|(id, _, _)| *id == order_id)?;
    let refunded_since = refunds
        .iter()
        .filter(|refund| refund.order_id == order_id)
        .map(|refund| u64::try_from(refund.amount_cents).unwrap_or(0))
        .sum::<u64>();
    Some(OrderState {
        order_id: order_id.to_owned(),
        paid_cents,
        refunded_cents: refunded_cents + refunded_since,
    })
}

fn receipt(refund: &Refund) -> Receipt {
    Receipt {
        refund_id: refund.refund_id.clone(),
        order_id: refund.order_id.clone(),
        amount_cents: u64::try_from(refund.amount_cents).unwrap_or(0),
    }
}

/// The body of `request` as JSON, or the `400` that says why it is not.
async fn read_json<T: serde::de::DeserializeOwned>(
    request: Request<Incoming>,
) -> Result<T, Response<Full<Bytes>>> {
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(err) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                &format!("unreadable body: {err}"),
            ));
        }
    };
    serde_json::from_slice(&body)
        .map_err(|err| error(StatusCode::BAD_REQUEST, &format!("bad JSON body: {err}")))
}

/// How the provider answers a refused or failed request.
fn tool_error(err: &ToolError) -> Answer {
    let status = match err.kind() {
        ErrorKind::OutcomeUnknown => return Err(ConnectionDropped),
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Refused => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut body = json!({"error": err.what()});
    if let Some(why) = err.why() {
        body["why"] = Value::from(why);
    }
    Ok(json_response(status, &body))
}

fn ok(body: &impl serde::Serialize) -> Response<Full<Bytes>> {
    json_response(StatusCode::OK, body)
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json_response(status, &json!({"error": message}))
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(body).expect("a JSON value serializes");
    let mut response = respond(status, Bytes::from(bytes));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn respond(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
}
