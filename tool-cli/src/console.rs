//! `toolgate console`: the operators' web console over a store. Server-rendered pages (no
//! script) for the approval queue, operations by state, the outbox and a run's audit trail;
//! signing in with an operator token; acting through the same functions as the command line,
//! so a decision, a settlement or a resume made here is checked, stored and audited as one
//! made there.

mod approvals_page;
mod audit_page;
mod html;
mod http;
mod layout;
mod operations_page;
mod outbox_page;
mod routes;
mod sessions;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use toolgate_core::store::OperationStore;

use crate::error::Failure;
use crate::open::{self, Opened, StoreSpec};
use crate::time::now_ms;
use sessions::{Flash, Sessions};

/// The console of one store: its pages' state.
pub(crate) struct Console {
    opened: Opened,
    sessions: Sessions,
    /// The `Host` headers it answers, when it listens on loopback (a page of another site
    /// whose name resolves to 127.0.0.1 gets no answer); any, otherwise.
    hosts: Option<Vec<String>>,
}

impl Console {
    /// The store.
    fn store(&self) -> &dyn OperationStore {
        self.opened.store()
    }

    /// Whether a request naming the host `host` is answered.
    fn answers_host(&self, host: Option<&str>) -> bool {
        match (&self.hosts, host) {
            (None, _) => true,
            (Some(hosts), Some(host)) => hosts.iter().any(|h| h.eq_ignore_ascii_case(host)),
            (Some(_), None) => false,
        }
    }
}

/// `console --listen ADDR`: serves the console of the store `spec` names until the process is
/// interrupted (Ctrl-C), then closes the store.
pub(crate) async fn run(spec: &StoreSpec, listen: SocketAddr) -> Result<String, Failure> {
    let opened = open::open(spec).await?;
    let listener = TcpListener::bind(listen).await.map_err(|e| {
        Failure::usage(
            format!("could not listen on {listen}"),
            e.to_string(),
            "give --listen another ADDRESS:PORT (port 0 picks a free one)",
        )
    })?;
    let bound = listener.local_addr().map_err(|e| {
        Failure::usage(
            format!("could not listen on {listen}"),
            e.to_string(),
            "run the command again",
        )
    })?;
    let loopback = bound.ip().is_loopback();
    let hosts = loopback.then(|| {
        let port = bound.port();
        vec![
            bound.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]
    });
    let console = Arc::new(Console {
        opened,
        sessions: Sessions::default(),
        hosts,
    });
    announce(bound, loopback);
    serve(&console, listener).await;
    if let Ok(console) = Arc::try_unwrap(console) {
        console.opened.close().await;
    }
    Ok("toolgate console stopped\n".to_owned())
}

/// Says where the console is, on stdout, at once: its first line is the address.
fn announce(bound: SocketAddr, loopback: bool) {
    let reach = if loopback {
        "it listens on loopback: only this machine reaches it (give --listen ADDRESS:PORT to serve others)"
    } else {
        "it listens beyond loopback: whoever reaches this address gets the sign-in page, and the console speaks plain HTTP, so serve it behind a proxy that terminates TLS"
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "toolgate console on http://{bound}/");
    let _ = writeln!(out, "  {reach}; Ctrl-C stops it");
    let _ = out.flush();
}

/// Answers connections until Ctrl-C, then lets the open ones finish the request they are
/// answering (a decision half made would lose its audit record) and closes them.
async fn serve(console: &Arc<Console>, listener: TcpListener) {
    let mut stop = std::pin::pin!(tokio::signal::ctrl_c());
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let console = Arc::clone(console);
        let requests = service_fn(move |request| {
            let console = Arc::clone(&console);
            async move {
                let answer = match http::read(request).await {
                    Ok(request) => routes::answer(&console, &request, now_ms()).await,
                    Err(refusal) => refusal,
                };
                Ok::<_, Infallible>(answer.into_response())
            }
        });
        let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), requests);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    graceful.shutdown().await;
}

/// What an action came to, for the next page: the command line's own words either way.
fn flash_of(done: Result<String, Failure>) -> Flash {
    match done {
        Ok(text) => Flash::Done(text.trim_end().to_owned()),
        Err(failure) => failed(failure),
    }
}

/// `failure`'s what, why and what to do, for a page.
fn failed(failure: Failure) -> Flash {
    let (Failure::Usage(e) | Failure::Refused(e) | Failure::Store(e)) = failure;
    Flash::Failed {
        what: e.what,
        why: e.why,
        next: e.next,
    }
}
