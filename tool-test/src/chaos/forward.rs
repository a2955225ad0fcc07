//! Forwarding one request to the provider: on a connection of its own, its hop-by-hop headers
//! left out, and the provider's answer read whole, up to the proxy's body limit.

use std::io;
use std::net::SocketAddr;

use http::header::HOST;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::Upstream;
use super::hop_by_hop::remove_hop_by_hop;

/// Where requests are forwarded, and how much of an answer is read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forward {
    pub(crate) upstream: SocketAddr,
    pub(crate) body_limit: usize,
}

/// Why a forwarded request got no answer to pass on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// No connection to the provider.
    #[error("the proxy could not connect to the upstream {upstream}: {source}")]
    Connect {
        upstream: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The exchange broke: the request could not be sent, or the answer did not end.
    #[error("the exchange with the upstream broke: {0}")]
    Exchange(#[from] hyper::Error),
    /// The answer's body is over the proxy's limit.
    #[error(
        "the upstream's answer ({status}) is longer than the proxy's body limit of {limit} bytes"
    )]
    TooLong { status: StatusCode, limit: usize },
    /// The proxy stopped before the answer came.
    #[error("the proxy stopped")]
    Stopped,
}

impl Failure {
    /// How far the request got.
    pub(crate) fn upstream(&self) -> Upstream {
        match self {
            Failure::TooLong { status, .. } => Upstream::Answered(*status),
            Failure::Connect { .. } | Failure::Exchange(_) | Failure::Stopped => Upstream::Failed,
        }
    }
}

impl Forward {
    /// Sends `request` (its body read whole) to the provider and reads its answer whole.
    pub(crate) async fn send(
        self,
        mut request: Request<Bytes>,
    ) -> Result<Response<Bytes>, Failure> {
        remove_hop_by_hop(request.headers_mut());
        let authority = HeaderValue::try_from(self.upstream.to_string())
            .expect("a socket address is a valid header value");
        request.headers_mut().insert(HOST, authority);
        let stream =
            TcpStream::connect(self.upstream)
                .await
                .map_err(|source| Failure::Connect {
                    upstream: self.upstream,
                    source,
                })?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let limit = self.body_limit;
        let exchange = async move {
            let response = sender.send_request(request.map(Full::new)).await?;
            let (mut parts, body) = response.into_parts();
            let body = match Limited::new(body, limit).collect().await {
                Ok(body) => body.to_bytes(),
                Err(err) if err.is::<LengthLimitError>() => {
                    return Err(Failure::TooLong {
                        status: parts.status,
                        limit,
                    });
                }
                Err(err) => match err.downcast::<hyper::Error>() {
                    Ok(err) => return Err(Failure::Exchange(*err)),
                    Err(err) => unreachable!("a hyper body fails with hyper's error: {err}"),
                },
            };
            remove_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, body))
        };
        tokio::pin!(connection, exchange);
        tokio::select! {
            biased;
            answer = &mut exchange => answer,
            ended = &mut connection => {
                // A connection the provider closed in order after its answer: the answer is
                // buffered for the exchange to read.
                ended?;
                exchange.await
            }
        }
    }
}
