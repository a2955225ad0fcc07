//! A proxy in front of a PostgreSQL server that counts what its clients send: round trips,
//! statements and the commits of transactions that wrote. For the tests and benchmarks that
//! hold the store to a number of round trips a call (a count, not a time).
//!
//! The proxy reads the client's side of the wire protocol and copies the server's untouched:
//!
//! - a **round trip** is a `Sync` or a simple `Query`: what the client then waits on for the
//!   server's `ReadyForQuery`. A bare `Sync` (sqlx's ping of a connection it hands out or takes
//!   back) is a round trip with no statement;
//! - a **statement** is a `Bind` of a prepared statement or a simple `Query`, its text known from
//!   the `Parse` that prepared it;
//! - a **commit** is the end of a transaction that wrote: an autocommit statement that writes,
//!   or a `COMMIT` after one. A statement writes when its text holds `INSERT`, `UPDATE`,
//!   `DELETE` or `MERGE` as a word (row locks `FOR UPDATE` included), or calls a function
//!   named `toolgate_…` (the store's functions write).
//!
//! The proxy answers a TLS or GSS encryption request "no" itself, so that it reads plain text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The protocol code of a TLS request, sent in place of a startup message.
const SSL_REQUEST: i32 = 80_877_103;
/// The protocol code of a GSS encryption request.
const GSSENC_REQUEST: i32 = 80_877_104;

/// What the clients of a [`CountingProxy`] sent, from its start or between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Round trips: `Sync`s and simple queries.
    pub round_trips: u64,
    /// Statements run.
    pub statements: u64,
    /// Transactions that wrote, committed.
    pub commits: u64,
}

impl std::ops::Sub for Tally {
    type Output = Tally;

    fn sub(self, earlier: Tally) -> Tally {
        Tally {
            round_trips: self.round_trips - earlier.round_trips,
            statements: self.statements - earlier.statements,
            commits: self.commits - earlier.commits,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    tally: Tally,
    /// The statements run, in order, each as its first words.
    log: Vec<String>,
}

/// A counting proxy, listening on a loopback port until it is dropped.
#[derive(Debug)]
pub struct CountingProxy {
    url: String,
    counts: Arc<Mutex<Counts>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    /// Starts a proxy in front of the server of `database_url` (`postgres://…@host:port/db`).
    ///
    /// Panics when the URL names no host and port, or no loopback port can be had.
    pub async fn start(database_url: &str) -> CountingProxy {
        let (before, server, after) = split_authority(database_url);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the counting proxy binds a loopback port");
        let port = listener.local_addr().expect("a bound address").port();
        let counts = Arc::new(Mutex::new(Counts::default()));
        let accept = tokio::spawn({
            let counts = counts.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let server = server.clone();
                    let counts = counts.clone();
                    tokio::spawn(async move {
                        // A connection that breaks ends here; the client sees it closed.
                        let _ = relay(client, &server, counts).await;
                    });
                }
            }
        });
        CountingProxy {
            url: format!("{before}127.0.0.1:{port}{after}"),
            counts,
            accept,
        }
    }

    /// The URL of the same database through the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What was counted so far.
    pub fn tally(&self) -> Tally {
        self.lock().tally
    }

    /// The statements run so far, in order, each as its first words.
    pub fn log(&self) -> Vec<String> {
        self.lock().log.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// `postgres://user:password@host:port/db?x` as (`postgres://user:password@`, `host:port`,
/// `/db?x`).
fn split_authority(url: &str) -> (String, String, String) {
    let scheme_end = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[scheme_end..];
    let host_start = scheme_end + rest.find('@').map_or(0, |at| at + 1);
    let host_end = url[host_start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| host_start + at);
    let server = &url[host_start..host_end];
    assert!(
        !server.is_empty() && server.contains(':'),
        "the counting proxy needs a URL with host:port, got {url:?}"
    );
    (
        url[..host_start].to_owned(),
        server.to_owned(),
        url[host_end..].to_owned(),
    )
}

/// Relays one client connection, counting what the client sends.
async fn relay(
    mut client: TcpStream,
    server: &str,
    counts: Arc<Mutex<Counts>>,
) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    // The untyped messages first: encryption requests, answered here, then the startup (or a
    // cancel request), forwarded.
    let startup = loop {
        let length = client.read_i32().await?;
        let mut body = vec![0; usize::try_from(length - 4).unwrap_or(0)];
        client.read_exact(&mut body).await?;
        let code = i32::from_be_bytes(body[..4].try_into().unwrap_or_default());
        if code == SSL_REQUEST || code == GSSENC_REQUEST {
            client.write_all(b"N").await?;
            continue;
        }
        let mut message = length.to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        break message;
    };
    let upstream = TcpStream::connect(server).await?;
    upstream.set_nodelay(true)?;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    server_write.write_all(&startup).await?;
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut session = Session::default();
    let forth = async {
        loop {
            let kind = client_read.read_u8().await?;
            let length = client_read.read_i32().await?;
            let mut body = vec![0; usize::try_from(length - 4).unwrap_or(0)];
            client_read.read_exact(&mut body).await?;
            session.saw(kind, &body, &counts);
            let mut message = Vec::with_capacity(body.len() + 5);
            message.push(kind);
            message.extend_from_slice(&length.to_be_bytes());
            message.extend_from_slice(&body);
            server_write.write_all(&message).await?;
            if kind == b'X' {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let ended = forth.await;
    let _ = server_write.shutdown().await;
    let _ = back.await;
    ended
}

/// One connection's state: its prepared statements, what the current round trip ran, and
/// whether a transaction is open and wrote.
#[derive(Default)]
struct Session {
    prepared: HashMap<String, String>,
    /// Statements of the round trip in progress.
    pending: Vec<String>,
    in_transaction: bool,
    wrote: bool,
}

impl Session {
    fn saw(&mut self, kind: u8, body: &[u8], counts: &Mutex<Counts>) {
        match kind {
            b'P' => {
                let mut fields = body.split(|b| *b == 0);
                let name = text(fields.next());
                let query = text(fields.next());
                self.prepared.insert(name, query);
            }
            b'B' => {
                let mut fields = body.split(|b| *b == 0);
                let _portal = fields.next();
                let statement = text(fields.next());
                let query = self.prepared.get(&statement).cloned().unwrap_or_default();
                self.pending.push(query);
            }
            b'Q' => {
                let query = text(body.split(|b| *b == 0).next());
                self.pending.push(query);
                self.round_trip(counts);
            }
            b'S' => self.round_trip(counts),
            _ => {}
        }
    }

    fn round_trip(&mut self, counts: &Mutex<Counts>) {
        let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.tally.round_trips += 1;
        for query in self.pending.drain(..) {
            counts.tally.statements += 1;
            let lower = query.trim_start().to_ascii_lowercase();
            if lower.starts_with("begin") || lower.starts_with("start transaction") {
                self.in_transaction = true;
                self.wrote = false;
            } else if lower.starts_with("commit") || lower.starts_with("end") {
                if self.in_transaction && self.wrote {
                    counts.tally.commits += 1;
                }
                self.in_transaction = false;
            } else if lower.starts_with("rollback") {
                self.in_transaction = false;
            } else if writes(&lower) {
                if self.in_transaction {
                    self.wrote = true;
                } else {
                    counts.tally.commits += 1;
                }
            }
            counts.log.push(first_words(&query));
        }
    }
}

/// Whether a statement (lower case) writes.
fn writes(query: &str) -> bool {
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .collect();
    let changes = words
        .iter()
        .any(|word| matches!(*word, "insert" | "update" | "delete" | "merge"));
    let calls_ours = query.match_indices("toolgate_").any(|(at, _)| {
        let name_end = query[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(query.len(), |end| at + end);
        query[name_end..].trim_start().starts_with('(')
    });
    changes || calls_ours
}

fn text(field: Option<&[u8]>) -> String {
    String::from_utf8_lossy(field.unwrap_or_default()).into_owned()
}

fn first_words(query: &str) -> String {
    let words: Vec<&str> = query.split_whitespace().take(8).collect();
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_splits_around_its_host_and_port() {
        let (before, server, after) = split_authority("postgres://u:p@127.0.0.1:5432/db?x=1");
        assert_eq!(before, "postgres://u:p@");
        assert_eq!(server, "127.0.0.1:5432");
        assert_eq!(after, "/db?x=1");
    }

    #[test]
    fn writes_are_told_from_reads() {
        assert!(writes("insert into toolgate_audit (kind) values ($1)"));
        assert!(writes(
            "with run as (insert into t values (1) returning 1) select 1"
        ));
        assert!(writes("select outcome from toolgate_begin_turn($1, $2)"));
        assert!(writes("select * from t where k = $1 for update"));
        assert!(!writes(
            "select updated_ms, result from toolgate_operations where k = $1"
        ));
        assert!(!writes("select 1"));
    }
}
