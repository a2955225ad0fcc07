//! The client a tool would have: one request on a connection of its own, within a deadline of
//! its own. When the deadline passes, the connection is closed at once: the request and its
//! connection are one future, dropped together.

use std::error::Error as _;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use http::header::HOST;
use http::{HeaderValue, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What became of a request.
pub(crate) enum Outcome {
    /// An answer, read whole.
    Answered(Response<Bytes>),
    /// No answer before the deadline; the client closed the connection.
    TimedOut,
    /// The connection failed before an answer.
    Broke(hyper::Error),
}

impl Outcome {
    /// The answer, or a panic that says what came instead.
    #[track_caller]
    pub(crate) fn answer(self) -> Response<Bytes> {
        match self {
            Outcome::Answered(answer) => answer,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    /// Whether the connection was reset by the peer (a TCP `RST`), rather than closed.
    pub(crate) fn is_reset(&self) -> bool {
        let Outcome::Broke(error) = self else {
            return false;
        };
        let mut source = error.source();
        while let Some(error) = source {
            if let Some(io) = error.downcast_ref::<io::Error>() {
                return io.kind() == io::ErrorKind::ConnectionReset;
            }
            source = error.source();
        }
        false
    }
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Answered(answer) => write!(
                f,
                "Answered({} {:?})",
                answer.status(),
                String::from_utf8_lossy(answer.body())
            ),
            Outcome::TimedOut => f.write_str("TimedOut"),
            Outcome::Broke(error) => write!(f, "Broke({error:?})"),
        }
    }
}

/// A request of `method` to `target` under the idempotency `key`, with `body`.
pub(crate) fn request(
    method: Method,
    target: &str,
    key: Option<&str>,
    body: &str,
) -> Request<Bytes> {
    let mut request = Request::builder().method(method).uri(target);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.body(Bytes::from(body.to_owned())).unwrap()
}

/// A `POST` of a JSON `body` to `target` under `key`.
pub(crate) fn post(target: &str, key: &str, body: &str) -> Request<Bytes> {
    let mut request = request(Method::POST, target, Some(key), body);
    request
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    request
}

/// Sends `request` to `addr`, and gives up after `deadline` if one is set.
pub(crate) async fn send(
    addr: SocketAddr,
    request: Request<Bytes>,
    deadline: Option<Duration>,
) -> Outcome {
    match deadline {
        Some(deadline) => send_until(addr, request, tokio::time::sleep(deadline)).await,
        None => send_until(addr, request, std::future::pending()).await,
    }
}

/// Sends `request` to `addr`, and gives up when `give_up` is ready: a deadline that starts
/// when the test says, so that it cannot pass before the proxy has the request.
pub(crate) async fn send_until(
    addr: SocketAddr,
    request: Request<Bytes>,
    give_up: impl Future<Output = ()>,
) -> Outcome {
    tokio::select! {
        outcome = exchange(addr, request) => match outcome {
            Ok(answer) => Outcome::Answered(answer),
            Err(error) => Outcome::Broke(error),
        },
        () = give_up => Outcome::TimedOut,
    }
}

async fn exchange(
    addr: SocketAddr,
    mut request: Request<Bytes>,
) -> Result<Response<Bytes>, hyper::Error> {
    let host = HeaderValue::try_from(addr.to_string()).unwrap();
    request.headers_mut().entry(HOST).or_insert(host);
    let stream = TcpStream::connect(addr).await.expect("the proxy listens");
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    let answer = async move {
        let answer = sender.send_request(request.map(Full::new)).await?;
        let (parts, body) = answer.into_parts();
        Ok(Response::from_parts(
            parts,
            body.collect().await?.to_bytes(),
        ))
    };
    tokio::pin!(connection, answer);
    tokio::select! {
        biased;
        answer = &mut answer => answer,
        ended = &mut connection => {
            ended?;
            answer.await
        }
    }
}
