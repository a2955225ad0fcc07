//! [`FaultProxy`]: an HTTP/1.1 reverse proxy on a loopback port that plays a [`FaultPlan`] on
//! the requests a tool sends its provider.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http::HeaderName;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::FaultPlan;
use super::forward::Forward;
use super::lifetime::{Lifetime, Stop, lifetime};
use super::play::Player;
use super::reset::ResettableStream;

/// The header a request's idempotency key is read from, unless told otherwise.
pub const DEFAULT_KEY_HEADER: &str = "idempotency-key";

/// The longest request or answer body the proxy reads, unless told otherwise: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// An HTTP/1.1 reverse proxy in front of a provider, on a free loopback port, that plays a
/// [`FaultPlan`] on the requests it receives and records each one. Point the tool's base URL at
/// [`FaultProxy::url`].
///
/// Every request is read whole (up to the body limit: a longer one is answered
/// `413 Payload Too Large`, and neither recorded nor forwarded), recorded with the value of its
/// idempotency-key header, and given the fault its plan holds for it, if any. A request without
/// a fault is forwarded on a new connection to the provider, its method, path, query, headers
/// and body unchanged but for the hop-by-hop headers and `Host` (the provider's address); the
/// provider's answer comes back the same way. A provider that cannot be reached, or whose answer
/// is over the body limit, is answered `502 Bad Gateway`.
///
/// A request on its way to the provider is not taken back when its client gives up: the
/// exchange runs on a task of its own, as a request on the wire would.
///
/// The proxy runs on the runtime it was started on until [`FaultProxy::shutdown`] or until it
/// is dropped; either closes its port and every connection.
///
/// # Examples
///
/// ```no_run
/// use std::net::SocketAddr;
/// use toolgate_test::chaos::{Fault, FaultProxy, Route};
///
/// # async fn run(provider: SocketAddr) -> std::io::Result<()> {
/// let proxy = FaultProxy::start(provider).await?;
/// let refunds = Route::post("/refunds");
/// proxy.plan().at(refunds.clone(), [1], Fault::ResetAfterApply);
/// // ... the tool, its base URL set to `proxy.url()`, refunds twice under one key ...
/// assert_eq!(proxy.plan().keys(&refunds), ["refund-ORD-1", "refund-ORD-1"]);
/// proxy.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    plan: FaultPlan,
    stop: Stop,
}

/// Builds a [`FaultProxy`] with a plan, key header or body limit of its own.
///
/// ```no_run
/// use http::HeaderName;
/// use toolgate_test::chaos::{FaultHook, FaultPlan, FaultProxy};
///
/// # async fn run(provider: std::net::SocketAddr) -> std::io::Result<()> {
/// // One plan and one record for the provider behind the proxy and for a hook.
/// let plan = FaultPlan::new();
/// let proxy = FaultProxy::builder(provider)
///     .plan(plan.clone())
///     .key_header(HeaderName::from_static("x-request-id"))
///     .body_limit(64 * 1024)
///     .start()
///     .await?;
/// let hook = FaultHook::new(plan);
/// # let _ = (proxy, hook);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is started"]
pub struct FaultProxyBuilder {
    upstream: SocketAddr,
    plan: FaultPlan,
    key_header: HeaderName,
    body_limit: usize,
}

impl FaultProxy {
    /// A proxy in front of the provider at `upstream`, with an empty plan, the default key
    /// header ([`DEFAULT_KEY_HEADER`]) and body limit ([`DEFAULT_BODY_LIMIT`]).
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        FaultProxy::builder(upstream).start().await
    }

    /// A builder of a proxy in front of the provider at `upstream`.
    pub fn builder(upstream: SocketAddr) -> FaultProxyBuilder {
        FaultProxyBuilder {
            upstream,
            plan: FaultPlan::new(),
            key_header: HeaderName::from_static(DEFAULT_KEY_HEADER),
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }

    /// The proxy's base URL, `http://127.0.0.1:PORT`, with no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the provider behind it.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// The plan it plays, and the record of the requests it received.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Stops the proxy, and returns once its port and every connection are closed and every
    /// exchange with the provider has ended (one under way is abandoned). Dropping the proxy
    /// stops it too, without waiting.
    pub async fn shutdown(self) {
        self.stop.stop().await;
    }
}

impl FaultProxyBuilder {
    /// Plays `plan` (a clone of one the test keeps, or shares with a [`FaultHook`]) in place of
    /// an empty one.
    ///
    /// [`FaultHook`]: super::FaultHook
    pub fn plan(mut self, plan: FaultPlan) -> Self {
        self.plan = plan;
        self
    }

    /// Reads the idempotency key from the header `name` (default [`DEFAULT_KEY_HEADER`]).
    pub fn key_header(mut self, name: HeaderName) -> Self {
        self.key_header = name;
        self
    }

    /// Reads request and answer bodies up to `bytes` (default [`DEFAULT_BODY_LIMIT`]).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Starts the proxy on a free loopback port, on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn start(self) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, lifetime) = lifetime();
        let player = Arc::new(Player {
            plan: self.plan.clone(),
            forward: Forward {
                upstream: self.upstream,
                body_limit: self.body_limit,
            },
            key_header: self.key_header,
            lifetime: lifetime.clone(),
        });
        lifetime.spawn(accept(listener, player, lifetime.clone()));
        Ok(FaultProxy {
            addr,
            upstream: self.upstream,
            plan: self.plan,
            stop,
        })
    }
}

/// Serves each connection `listener` accepts on a task of the proxy's lifetime.
async fn accept(listener: TcpListener, player: Arc<Player>, lifetime: Lifetime) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // A connection that failed before it was accepted, or no file descriptor left for
            // it: the next one may do better.
            Err(_) => {
                tokio::task::yield_now().await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (stream, reset) = ResettableStream::new(stream);
        let player = player.clone();
        lifetime.spawn(async move {
            let service = service_fn(move |request| player.clone().play(request, reset.clone()));
            // It ends in an error when the client goes away or the proxy resets it: neither is
            // the proxy's fault.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream)
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}
