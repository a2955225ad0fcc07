//! How the proxy answers one request: it reads the request, asks the plan for its fault, and
//! plays it: answers in the provider's place, waits, forwards, or withholds the provider's answer.

use std::sync::Arc;

use http::header::{CONTENT_TYPE, HeaderName, RETRY_AFTER};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use tokio::sync::oneshot;

use super::fault::retry_after_seconds;
use super::forward::{Failure, Forward};
use super::lifetime::Lifetime;
use super::reset::ResetSwitch;
use super::{Fault, FaultPlan, Upstream};

/// What every connection of one proxy shares.
#[derive(Debug)]
pub(crate) struct Player {
    pub(crate) plan: FaultPlan,
    pub(crate) forward: Forward,
    pub(crate) key_header: HeaderName,
    /// Exchanges with the provider run on tasks of the proxy's lifetime, so that a client that
    /// gives up does not take back a request already on its way.
    pub(crate) lifetime: Lifetime,
}

/// Why the proxy ends a connection without an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Hangup {
    /// A [`Fault::ResetAfterApply`].
    #[error("the proxy reset the connection, as planned")]
    Reset,
    /// The request's body did not arrive whole.
    #[error("the client's request body broke: {0}")]
    Body(#[source] hyper::Error),
}

type Answer = Result<Response<Full<Bytes>>, Hangup>;

impl Player {
    /// Answers `request`, received on the connection that `reset` resets.
    pub(crate) async fn play(
        self: Arc<Self>,
        request: Request<Incoming>,
        reset: ResetSwitch,
    ) -> Answer {
        let (mut parts, body) = request.into_parts();
        let body = match Limited::new(body, self.forward.body_limit).collect().await {
            Ok(body) => body.to_bytes(),
            Err(err) if err.is::<LengthLimitError>() => {
                let why = format!(
                    "the request body is longer than the fault proxy's limit of {} bytes",
                    self.forward.body_limit
                );
                return Ok(refusal(StatusCode::PAYLOAD_TOO_LARGE, &why));
            }
            Err(err) => match err.downcast::<hyper::Error>() {
                Ok(err) => return Err(Hangup::Body(*err)),
                Err(err) => unreachable!("a hyper body fails with hyper's error: {err}"),
            },
        };
        let key = parts
            .headers
            .get(&self.key_header)
            .and_then(|key| key.to_str().ok())
            .map(str::to_owned);
        let path = parts.uri.path().to_owned();
        let (index, fault) = self.plan.arrive(parts.method.clone(), path, key);
        match fault {
            Some(Fault::Unavailable) => {
                return Ok(refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "a planned fault: the provider is unavailable",
                ));
            }
            Some(Fault::RateLimited { retry_after }) => {
                let mut answer = refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    "a planned fault: the provider is rate limited",
                );
                answer.headers_mut().insert(
                    RETRY_AFTER,
                    HeaderValue::from(retry_after_seconds(retry_after)),
                );
                return Ok(answer);
            }
            Some(Fault::Delay(delay)) => {
                let waiting = self.plan.waiting(index);
                tokio::time::sleep(delay).await;
                waiting.sent();
            }
            _ => {}
        }
        // What the server side put there is not the provider's business.
        parts.extensions = http::Extensions::new();
        let answer = self.send(index, Request::from_parts(parts, body)).await;
        match fault {
            Some(Fault::DropAfterApply) => {
                // Until the client closes the connection: hyper then drops this future, and the
                // provider's answer with it.
                std::future::pending().await
            }
            Some(Fault::ResetAfterApply) => {
                reset.trip();
                Err(Hangup::Reset)
            }
            _ => Ok(answer.map_or_else(
                |failure| refusal(StatusCode::BAD_GATEWAY, &failure.to_string()),
                |answer| answer.map(Full::new),
            )),
        }
    }

    /// Forwards the request at `index` of the record on a task of its own, notes how far it
    /// got, and answers the provider's answer.
    async fn send(
        &self,
        index: usize,
        request: Request<Bytes>,
    ) -> Result<Response<Bytes>, Failure> {
        let (answered, answer) = oneshot::channel();
        let (plan, forward) = (self.plan.clone(), self.forward);
        plan.reach(index, Upstream::Sent);
        self.lifetime.spawn(async move {
            let answer = forward.send(request).await;
            let upstream = match &answer {
                Ok(answer) => Upstream::Answered(answer.status()),
                Err(failure) => failure.upstream(),
            };
            plan.reach(index, upstream);
            let _ = answered.send(answer);
        });
        // The sender goes only when the proxy stops, which ends this connection too.
        answer.await.map_err(|_| Failure::Stopped)?
    }
}

/// An answer the proxy gives in the provider's place: `status`, and `why` as plain text.
fn refusal(status: StatusCode, why: &str) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::from(format!(
        "toolgate fault proxy: {why}\n"
    ))));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}
