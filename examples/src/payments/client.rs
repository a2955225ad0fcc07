//! The demo tools' HTTP client of the fake payment provider: [`Payments`] over the routes of the
//! table in [`crate::payments`], with the provider's faults told apart the way a real client must.
//!
//! | what happened | a refund (a write) | a read |
//! |---|---|---|
//! | no connection, nothing sent | `unavailable` | `unavailable` |
//! | `503` | `unavailable`: nothing applied | `unavailable` |
//! | no answer within the timeout | `outcome_unknown`: it may have been applied | `timeout` |
//! | the connection dropped after sending | `outcome_unknown` | `unavailable` |
//! | a request that cannot be built (a URL too long) | `invalid_arguments`: nothing sent | `invalid_arguments` |
//!
//! Text from the model goes into a URL only as one path segment, percent-encoded
//! ([`segment`]): an order id `ORD-1001/../refunds` asks for the order of that name, never for
//! another route.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use toolgate::ToolError;

use crate::shop::{ActionReceipt, OrderState, Payments, Receipt, money};

/// Told what the client sends and what comes back, one line each, for the desk's narration.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// The fake payment provider at one address.
#[derive(Clone)]
pub struct HttpPayments {
    /// `host:port`.
    authority: String,
    timeout: Duration,
    log: Option<Log>,
}

/// Every byte but the unreserved `A-Z a-z 0-9 - _ ~` is escaped in a path segment; `.` too, so
/// that no segment is `..`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'~');

/// `text` as one path segment of a URL: percent-encoded, so that `/`, `?`, `#`, `%` and `..` in it
/// are data, never a route, a query or a fragment.
pub fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// Why an exchange got no answer.
enum Failure {
    /// The request could not be built (a URL too long for HTTP): nothing was sent.
    Unbuildable(String),
    /// The request never left: no connection.
    NotSent(String),
    /// Sent, and no answer within the timeout.
    Timeout,
    /// Sent, and the connection dropped before the answer.
    Dropped(String),
}

/// An error answer's body.
#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    why: Option<String>,
}

impl HttpPayments {
    /// A client of the provider at `url` (`http://host:port`, or `host:port`) that waits
    /// `timeout` for each answer.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, String> {
        let authority = url
            .strip_prefix("http://")
            .unwrap_or(url)
            .trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
            return Err(format!(
                "`{url}` is not a provider URL: write http://HOST:PORT"
            ));
        }
        Ok(HttpPayments {
            authority: authority.to_owned(),
            timeout,
            log: None,
        })
    }

    /// Tells `log` about every request and answer.
    pub fn with_log(mut self, log: Log) -> Self {
        self.log = Some(log);
        self
    }

    /// Arms a fault: `spec` is a refund desk script's `fault` object.
    pub async fn arm_fault(&self, spec: &Value) -> Result<(), String> {
        let body = serde_json::to_vec(spec).expect("a JSON value serializes");
        match self.send(Method::POST, "/faults", None, Some(body)).await {
            Ok((StatusCode::NO_CONTENT, _)) => Ok(()),
            Ok((status, body)) => Err(message(status, &body)),
            Err(failure) => Err(self.detail(&failure)),
        }
    }

    /// The provider's ledger and request counts: `{"ledger": …, "provider_requests": …}`.
    pub async fn ledger(&self) -> Result<Value, String> {
        match self.send(Method::GET, "/ledger", None, None).await {
            Ok((StatusCode::OK, body)) => {
                serde_json::from_slice(&body).map_err(|err| format!("a bad ledger: {err}"))
            }
            Ok((status, body)) => Err(message(status, &body)),
            Err(failure) => Err(self.detail(&failure)),
        }
    }

    fn say(&self, line: &str) {
        if let Some(log) = &self.log {
            log(line);
        }
    }

    /// One request on a fresh connection: a fault on one exchange never touches another.
    async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), Failure> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.authority)
            .header(CONTENT_TYPE, "application/json");
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|err| Failure::Unbuildable(err.to_string()))?;
        let connect = async {
            let stream = TcpStream::connect(&self.authority)
                .await
                .map_err(|err| Failure::NotSent(err.to_string()))?;
            hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|err| Failure::NotSent(err.to_string()))
        };
        let (mut sender, connection) = tokio::time::timeout(self.timeout, connect)
            .await
            .map_err(|_| Failure::NotSent("no connection within the timeout".to_owned()))??;
        // Drives the connection; it ends when the exchange does, or with the fault that ended it,
        // which the exchange reports.
        tokio::spawn(connection);
        let exchange = async {
            let response = sender
                .send_request(request)
                .await
                .map_err(|err| Failure::Dropped(err.to_string()))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|err| Failure::Dropped(err.to_string()))?;
            Ok((status, body.to_bytes()))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Failure::Timeout)?
    }

    /// What the model is told of a failure: no address, port or OS wording, so that the same
    /// story gives the same words on any machine.
    fn describe(&self, failure: &Failure) -> String {
        match failure {
            Failure::Unbuildable(_) => {
                "the request cannot be sent to the payment provider as it is".to_owned()
            }
            Failure::NotSent(_) => "could not reach the payment provider".to_owned(),
            Failure::Timeout => format!(
                "the payment provider did not answer within {} ms",
                self.timeout.as_millis()
            ),
            Failure::Dropped(_) => {
                "the connection to the payment provider dropped before the answer".to_owned()
            }
        }
    }

    /// [`HttpPayments::describe`] with the detail, for the narration and the operator.
    fn detail(&self, failure: &Failure) -> String {
        match failure {
            Failure::NotSent(why) => format!(
                "could not reach the payment provider at {}: {why}",
                self.authority
            ),
            Failure::Dropped(why) | Failure::Unbuildable(why) => {
                format!("{} ({why})", self.describe(failure))
            }
            Failure::Timeout => self.describe(failure),
        }
    }

    /// A read's answer: the body of a `200`, `None` for a `404`, or the error.
    async fn read<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, ToolError> {
        self.say(&format!("GET {}", shortened(path)));
        let answer = self.send(Method::GET, path, None, None).await;
        self.say_answer(&answer);
        match answer {
            Ok((StatusCode::OK, body)) => parse(&body).map(Some),
            Ok((StatusCode::NOT_FOUND, _)) => Ok(None),
            Ok((status, body)) => Err(status_error(status, &body)),
            Err(Failure::Timeout) => Err(ToolError::timeout(self.describe(&Failure::Timeout))
                .with_why("a read changes nothing, so nothing is unknown")
                .with_next("try again in a moment")),
            Err(Failure::Unbuildable(why)) => Err(unbuildable(&why)),
            Err(failure) => Err(ToolError::unavailable(self.describe(&failure))
                .with_why("a read changes nothing, so it is safe to ask again")),
        }
    }

    fn say_answer(&self, answer: &Result<(StatusCode, Bytes), Failure>) {
        if self.log.is_none() {
            return;
        }
        let line = match answer {
            Ok((status, body)) if status.is_success() => format!("  ← {status} {}", brief(body))
                .trim_end()
                .to_owned(),
            Ok((status, body)) => format!("  ← {status} {}", message(*status, body)),
            Err(failure) => format!("  ← {}", self.detail(failure)),
        };
        self.say(&line);
    }
}

#[async_trait::async_trait]
impl Payments for HttpPayments {
    async fn order(&self, order_id: &str) -> Result<Option<OrderState>, ToolError> {
        self.read(&format!("/orders/{}", segment(order_id))).await
    }

    async fn refund(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: u64,
    ) -> Result<Receipt, ToolError> {
        self.say(&format!(
            "POST /refunds {} {} (Idempotency-Key {}…)",
            shortened(order_id),
            money(amount_cents),
            key.get(..10).unwrap_or(key)
        ));
        let body = json!({"order_id": order_id, "amount_cents": amount_cents});
        let body = serde_json::to_vec(&body).expect("a JSON value serializes");
        let answer = self
            .send(Method::POST, "/refunds", Some(key), Some(body))
            .await;
        self.say_answer(&answer);
        match answer {
            Ok((StatusCode::OK, body)) => parse(&body),
            Ok((status, body)) => Err(status_error(status, &body)),
            Err(Failure::Unbuildable(why)) => Err(unbuildable(&why)),
            Err(failure @ Failure::NotSent(_)) => {
                Err(ToolError::unavailable(self.describe(&failure))
                    .with_why("the refund was never sent, so nothing was applied"))
            }
            Err(failure) => Err(ToolError::outcome_unknown(self.describe(&failure))
                .with_why("the refund was sent, so the provider may have applied it")
                .with_next(
                    "do not issue another refund for this order; tell the customer the refund \
                     is being checked",
                )),
        }
    }

    async fn lookup(&self, key: &str) -> Result<Option<Receipt>, ToolError> {
        self.read(&format!("/refunds/{}", segment(key))).await
    }

    async fn crm_update(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
        self.act("/crm", "the CRM update", key, order_id).await
    }

    async fn notify(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
        self.act("/notifications", "the notification", key, order_id)
            .await
    }
}

impl HttpPayments {
    /// A CRM update or a notification (`what`) about `order_id`, posted to `path` under `key`.
    async fn act(
        &self,
        path: &str,
        what: &str,
        key: &str,
        order_id: &str,
    ) -> Result<ActionReceipt, ToolError> {
        self.say(&format!(
            "POST {path} {} (Idempotency-Key {}…)",
            shortened(order_id),
            key.get(..10).unwrap_or(key)
        ));
        let body = json!({"order_id": order_id});
        let body = serde_json::to_vec(&body).expect("a JSON value serializes");
        let answer = self.send(Method::POST, path, Some(key), Some(body)).await;
        self.say_answer(&answer);
        match answer {
            Ok((StatusCode::OK, body)) => parse(&body),
            Ok((status, body)) => Err(status_error(status, &body)),
            Err(Failure::Unbuildable(why)) => Err(unbuildable(&why)),
            Err(failure @ Failure::NotSent(_)) => {
                Err(ToolError::unavailable(self.describe(&failure))
                    .with_why(format!("{what} was never sent, so nothing was applied")))
            }
            Err(failure) => Err(
                ToolError::outcome_unknown(self.describe(&failure)).with_why(format!(
                    "{what} was sent, so the provider may have applied it"
                )),
            ),
        }
    }
}

/// The error for a request that cannot be built from the tool's arguments: nothing was sent.
fn unbuildable(why: &str) -> ToolError {
    ToolError::invalid_arguments("the request cannot be sent to the payment provider as it is")
        .with_why(format!("{why}: nothing was sent"))
        .with_next(
            "call again with arguments that match the tool's schema, such as order id ORD-1001",
        )
}

/// `text` cut after 120 characters, for the narration.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ToolError> {
    serde_json::from_slice(body).map_err(|err| {
        ToolError::internal("the payment provider sent an answer the client cannot read")
            .with_why(err.to_string())
    })
}

/// The error for a status other than the expected ones.
fn status_error(status: StatusCode, body: &[u8]) -> ToolError {
    let (what, why) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error, why }) => (error, why),
        Err(_) => (format!("the payment provider answered {status}"), None),
    };
    let err = match status {
        StatusCode::SERVICE_UNAVAILABLE => {
            ToolError::unavailable(format!("the payment provider answered {status}"))
                .with_why("it applied nothing")
        }
        StatusCode::UNPROCESSABLE_ENTITY => {
            ToolError::refused(what).with_next("look the order up again with get_order")
        }
        StatusCode::NOT_FOUND => ToolError::not_found(what),
        _ => ToolError::internal(format!("the payment provider answered {status}: {what}")),
    };
    match why {
        Some(why) if status != StatusCode::SERVICE_UNAVAILABLE => err.with_why(why),
        _ => err,
    }
}

fn message(status: StatusCode, body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(body) => body.error,
        Err(_) => format!("{status}"),
    }
}

/// A success body for the narration: the refund id when there is one.
fn brief(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => match map.get("refund_id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => String::new(),
        },
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::server::PaymentsServer;

    #[test]
    fn a_segment_escapes_everything_but_unreserved_characters() {
        for (text, escaped) in [
            ("ORD-1001", "ORD-1001"),
            ("ORD-1001/../refunds", "ORD-1001%2F%2E%2E%2Frefunds"),
            ("ORD-1001?x=1", "ORD-1001%3Fx%3D1"),
            ("ORD-1001#top", "ORD-1001%23top"),
            ("100%", "100%25"),
            ("..", "%2E%2E"),
            ("a b_c~é", "a%20b_c~%C3%A9"),
        ] {
            assert_eq!(segment(text), escaped, "{text}");
        }
    }

    /// A client of a provider started in process, with its ledger in `dir`.
    async fn client(dir: &tempfile::TempDir) -> HttpPayments {
        let server = PaymentsServer::open(dir.path().join("ledger.jsonl"), None).unwrap();
        let addr = server.spawn().await.unwrap();
        HttpPayments::new(&format!("http://{addr}"), Duration::from_secs(30)).unwrap()
    }

    #[tokio::test]
    async fn an_order_id_with_url_syntax_asks_for_that_order_and_no_other_route() {
        let dir = tempfile::tempdir().unwrap();
        let payments = client(&dir).await;
        let known = payments.order("ORD-1001").await.unwrap();
        assert_eq!(known.unwrap().paid_cents, 50_000);
        for id in [
            "ORD-1001?x=1",
            "ORD-1001#top",
            "ORD-1001/../refunds",
            "../ledger",
            "ORD-1001%",
            "ORD-1001%2F",
            "ORD 1001",
        ] {
            assert_eq!(payments.order(id).await.unwrap(), None, "{id}");
        }
        assert_eq!(payments.lookup("k/../../ledger").await.unwrap(), None);
        let ledger = payments.ledger().await.unwrap();
        assert_eq!(
            ledger["provider_requests"],
            json!({"refund": 0, "lookup": 1, "crm": 0, "notify": 0}),
            "only the lookup reached /refunds"
        );
    }

    #[tokio::test]
    async fn a_request_too_long_to_build_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let payments = client(&dir).await;
        let huge = format!("ORD-{}", "1".repeat(300_000));
        let err = payments.order(&huge).await.unwrap_err();
        assert_eq!(err.kind(), toolgate::ErrorKind::InvalidArguments, "{err:?}");
        assert!(err.why().unwrap().contains("nothing was sent"), "{err:?}");
        assert!(err.next().contains("ORD-1001"), "{err:?}");
        // The client still works.
        assert!(payments.order("ORD-1002").await.unwrap().is_some());
    }
}
