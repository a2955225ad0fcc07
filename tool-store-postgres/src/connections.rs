//! The store's own connections: every statement of the store runs on one of them, lent by a
//! [`Lease`], and none is checked when it is lent or taken back.
//!
//! sqlx's pool pings a connection when it hands it out and again when it takes it back, so a
//! statement cost three round trips. The store needs neither ping: a statement that fails says
//! already that its connection is gone (the store answers [`StoreError::Unreachable`] and the
//! dispatcher tries again), and the store knows when a connection may be unsafe to lend again,
//! which is when its lease did not end cleanly. The rules, decided by [`fate`]:
//!
//! - A lease that ends cleanly, or with an error the server answered (a unique violation, a
//!   lost claim), puts its connection back on the idle list. A transaction dropped on the way
//!   has queued its `ROLLBACK`, which is sent then, so no idle connection holds a lock.
//! - A lease dropped before it ended (a statement may have been in flight: the dispatcher cuts
//!   store calls at deadlines) drops its connection: its answer may still be on the wire.
//! - A lease that ends with a connection-level error ([`connection_lost`]) drops its connection
//!   and every idle one: after a server restart all of them are dead, and the next statement
//!   opens a fresh connection instead of failing once per dead idle one.
//!
//! Connections are opened with the pool's connect options ([`PgPool::connect_options`]), at
//! most the pool's `max_connections` at once, and a statement waits at most the pool's
//! `acquire_timeout` for one, then fails with `PoolTimedOut`, as it did on the pool. Idle ones
//! are lent last in, first out; one idle longer than the pool's `idle_timeout` (5 minutes when it
//! has none), or older than its `max_lifetime`, is closed rather than lent blind.
//!
//! [`StoreError::Unreachable`]: toolgate_core::store::StoreError::Unreachable

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use toolgate_core::store::StoreError;

use crate::error::is_unreachable;

/// How long a connection may stay idle and still be lent, when the pool has no `idle_timeout`:
/// under the idle timeouts of common load balancers and NAT gateways (AWS's is 350 s), which
/// drop a quiet connection without a word.
const IDLE_BOUND: Duration = Duration::from_secs(5 * 60);

/// The first pause between two connects to a server that refused one, doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// The store's connections to one database, shared by the clones of a store.
#[derive(Clone)]
pub(crate) struct Connections {
    shared: Arc<Shared>,
}

/// What the clones of a [`Connections`] share.
struct Shared {
    /// The settings: connect options, `max_connections`, `acquire_timeout`, `idle_timeout`,
    /// `max_lifetime`. No statement of the store runs on its connections.
    pool: PgPool,
    /// One permit a lease: at most `max_connections` are lent at once, so at most that many are
    /// open (a connection is opened only for a lease that found none idle).
    leases: Arc<Semaphore>,
    /// The connections no lease holds, the most recently used last.
    idle: Mutex<Vec<Idle>>,
    /// Set by [`Connections::close`]: nothing is lent any more.
    closed: AtomicBool,
}

/// An open connection and when it was opened.
struct Open {
    conn: PgConnection,
    opened: Instant,
}

/// A connection on the idle list and since when it is there.
struct Idle {
    open: Open,
    since: Instant,
}

impl Connections {
    /// Connections opened with `pool`'s settings. Opens none until the first lease.
    pub(crate) fn new(pool: PgPool) -> Connections {
        let max = pool.options().get_max_connections() as usize;
        Connections {
            shared: Arc::new(Shared {
                pool,
                leases: Arc::new(Semaphore::new(max)),
                idle: Mutex::new(Vec::new()),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The pool whose settings these connections follow.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.shared.pool
    }

    /// A connection, lent until the [`Lease`] ends: the most recently used idle one, or a new
    /// one when none is idle.
    ///
    /// # Errors
    ///
    /// `PoolTimedOut` when no connection could be had within the pool's `acquire_timeout`
    /// (every one is lent, or the server refuses connections or does not answer);
    /// `PoolClosed` once [`Connections::close`] was called; the connect's own error when the
    /// server answered it with one that will not pass (a wrong password, a missing database).
    pub(crate) async fn lease(&self) -> Result<Lease, sqlx::Error> {
        let deadline = Instant::now() + self.shared.pool.options().get_acquire_timeout();
        tokio::time::timeout_at(deadline, self.lease_before(deadline))
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut))
    }

    /// [`Connections::lease`], without the bound on the whole wait.
    async fn lease_before(&self, deadline: Instant) -> Result<Lease, sqlx::Error> {
        let shared = &self.shared;
        if shared.is_closed() {
            return Err(sqlx::Error::PoolClosed);
        }
        let permit = shared
            .leases
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        if shared.is_closed() {
            return Err(sqlx::Error::PoolClosed);
        }
        let open = match shared.take_idle() {
            Some(open) => open,
            None => shared.open(deadline).await?,
        };
        Ok(Lease {
            open: Some(open),
            shared: shared.clone(),
            _permit: permit,
        })
    }

    /// Lends nothing any more, waits for the leases in flight to end, and closes every
    /// connection.
    pub(crate) async fn close(&self) {
        let shared = &self.shared;
        shared.closed.store(true, Ordering::SeqCst);
        let max = shared.pool.options().get_max_connections();
        // Every permit, once every lease has ended; a second close finds the semaphore closed.
        if let Ok(all) = shared.leases.acquire_many(max).await {
            shared.leases.close();
            drop(all);
        }
        for idle in shared.drain_idle() {
            // The server is told goodbye; a connection that cannot say it is gone already.
            let _ = idle.open.conn.close().await;
        }
    }
}

impl Shared {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The idle list, even if a thread panicked holding it (the list is valid at every step).
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that may still be lent; those too long idle or
    /// too old are dropped on the way.
    fn take_idle(&self) -> Option<Open> {
        let now = Instant::now();
        let options = self.pool.options();
        let idle_bound = options.get_idle_timeout().unwrap_or(IDLE_BOUND);
        let mut stale = Vec::new();
        let found = {
            let mut idle = self.idle();
            loop {
                match idle.pop() {
                    Some(candidate)
                        if lendable(
                            now,
                            candidate.since,
                            candidate.open.opened,
                            idle_bound,
                            options.get_max_lifetime(),
                        ) =>
                    {
                        break Some(candidate.open);
                    }
                    Some(candidate) => stale.push(candidate),
                    None => break None,
                }
            }
        };
        // Closed by dropping them, out of the lock: the server sees the socket end.
        drop(stale);
        found
    }

    /// Puts `open` on the idle list; drops it when the connections are closed ([`Connections::close`]
    /// waits for every lease, then closes the idle ones).
    fn put_back(&self, open: Open) {
        if self.is_closed() {
            return;
        }
        self.idle().push(Idle {
            open,
            since: Instant::now(),
        });
    }

    /// Does with `open` what `fate` says.
    fn settle(&self, open: Open, fate: Fate) {
        match fate {
            Fate::Keep => self.put_back(open),
            Fate::Drop => drop(open),
            Fate::DropAllIdle => {
                drop(open);
                drop(self.drain_idle());
            }
        }
    }

    /// Takes every idle connection off the list.
    fn drain_idle(&self) -> Vec<Idle> {
        std::mem::take(&mut *self.idle())
    }

    /// Opens a connection with the pool's connect options, trying again while the server
    /// refuses connections or says it is starting up, as sqlx's pool does, until `deadline`
    /// (the caller's timeout ends the wait).
    async fn open(&self, deadline: Instant) -> Result<Open, sqlx::Error> {
        let most = (deadline.saturating_duration_since(Instant::now()) / 5).max(FIRST_BACKOFF);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let options = self.pool.connect_options();
            match PgConnection::connect_with(&options).await {
                Ok(conn) => {
                    return Ok(Open {
                        conn,
                        opened: Instant::now(),
                    });
                }
                Err(error) => {
                    if connection_lost(&error) {
                        // The server is gone or going: so are the idle connections.
                        drop(self.drain_idle());
                    }
                    if !worth_another_connect(&error) {
                        return Err(error);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(most);
        }
    }
}

impl fmt::Debug for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.shared;
        f.debug_struct("Connections")
            .field("idle", &shared.idle().len())
            .field("free", &shared.leases.available_permits())
            .field("closed", &shared.is_closed())
            .finish_non_exhaustive()
    }
}

/// A connection lent by [`Connections::lease`], and one of the permits that bound them.
///
/// End it with [`Lease::done`] or [`Lease::finish`]; dropped without either (its future was
/// cancelled), it drops its connection, which a statement may still be using.
pub(crate) struct Lease {
    /// The connection, until the lease ends.
    open: Option<Open>,
    shared: Arc<Shared>,
    /// Given back when the lease is dropped, after its connection is put back or dropped.
    _permit: OwnedSemaphorePermit,
}

impl Lease {
    /// The connection lent.
    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        match &mut self.open {
            Some(open) => &mut open.conn,
            None => unreachable!("a lease holds its connection until it ends"),
        }
    }

    /// Ends the lease after its work finished cleanly.
    pub(crate) async fn done(self) {
        self.end(Ending::Clean).await;
    }

    /// Ends the lease with the store's answer, which it passes on: the connection is kept
    /// unless the answer's error comes from a connection-level sqlx error (the error kept as
    /// the answer's source, by `error::store_error`).
    pub(crate) async fn finish<T>(self, answer: Result<T, StoreError>) -> Result<T, StoreError> {
        let cause = answer.as_ref().err().and_then(sqlx_cause);
        self.end(cause.map_or(Ending::Clean, Ending::Failed)).await;
        answer
    }

    /// Ends the lease as `ending` says ([`fate`]).
    pub(crate) async fn end(mut self, ending: Ending<'_>) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        let verdict = fate(ending);
        if verdict == Fate::Keep && open.conn.should_flush() {
            // A transaction dropped on the way queued its ROLLBACK: send it now, so that no
            // idle connection holds a transaction and its locks.
            if let Err(error) = open.conn.ping().await {
                let failed = fate(Ending::Failed(&error)).max(Fate::Drop);
                self.shared.settle(open, failed);
                return;
            }
        }
        self.shared.settle(open, verdict);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.shared.settle(open, fate(Ending::Dropped));
        }
    }
}

/// How a [`Lease`] ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending<'a> {
    /// Its work finished, whatever it answered, with no error of sqlx's.
    Clean,
    /// Its work ended with this error of sqlx's.
    Failed(&'a sqlx::Error),
    /// It was dropped before it ended: a statement may have been in flight.
    Dropped,
}

/// What becomes of a lease's connection, from the mildest to the harshest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    /// Back on the idle list.
    Keep,
    /// Closed.
    Drop,
    /// Closed, and every idle connection with it.
    DropAllIdle,
}

/// What becomes of the connection of a lease that ended as `ending` says.
///
/// Kept after clean work and after an error the server answered with (the connection is
/// ready for the next statement); dropped when a statement may have been in flight; dropped
/// with every idle one after a connection-level error, since those are dead too when the
/// server restarted.
fn fate(ending: Ending<'_>) -> Fate {
    match ending {
        Ending::Clean => Fate::Keep,
        Ending::Failed(error) if connection_lost(error) => Fate::DropAllIdle,
        Ending::Failed(_) => Fate::Keep,
        Ending::Dropped => Fate::Drop,
    }
}

/// Whether `error` says the connection failed rather than the statement: the server could not
/// be reached or ended the session ([`is_unreachable`]: I/O, TLS, a crashed worker, no
/// connection in time, SQLSTATE class `08`, `57P01`–`57P03`, `57P05`), or the connection's
/// conversation went wrong (`Protocol`).
fn connection_lost(error: &sqlx::Error) -> bool {
    is_unreachable(error) || matches!(error, sqlx::Error::Protocol(_))
}

/// Whether a failed connect is tried again before the wait ends, as sqlx's pool does: the
/// server refused the connection (it is not listening yet), has too many connections (`53300`,
/// which may be connections just dropped that it has not noticed yet) or is starting up
/// (`57P03`).
fn worth_another_connect(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("53300" | "57P03")),
        _ => false,
    }
}

/// Whether a connection opened at `opened` and idle since `since` may be lent at `now`: idle
/// no longer than `idle_bound`, and open no longer than `max_lifetime` when there is one.
fn lendable(
    now: Instant,
    since: Instant,
    opened: Instant,
    idle_bound: Duration,
    max_lifetime: Option<Duration>,
) -> bool {
    now.saturating_duration_since(since) <= idle_bound
        && max_lifetime.is_none_or(|max| now.saturating_duration_since(opened) <= max)
}

/// The sqlx error behind a store error, if one caused it.
fn sqlx_cause(error: &StoreError) -> Option<&sqlx::Error> {
    std::error::Error::source(error)?.downcast_ref::<sqlx::Error>()
}

/// How a lease whose work answered `result` ended.
pub(crate) fn ending<T>(result: &Result<T, sqlx::Error>) -> Ending<'_> {
    result.as_ref().err().map_or(Ending::Clean, Ending::Failed)
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[test]
    fn a_lease_keeps_its_connection_only_when_it_ended_with_the_server_answering() {
        let refused = sqlx::Error::Io(io::Error::from(io::ErrorKind::ConnectionRefused));
        let reset = sqlx::Error::Io(io::Error::from(io::ErrorKind::ConnectionReset));
        let garbled = sqlx::Error::Protocol("unexpected message".to_owned());
        let not_found = sqlx::Error::RowNotFound;
        let decode = sqlx::Error::ColumnNotFound("tool".to_owned());
        for (ending, expected) in [
            (Ending::Clean, Fate::Keep),
            (Ending::Failed(&not_found), Fate::Keep),
            (Ending::Failed(&decode), Fate::Keep),
            (Ending::Dropped, Fate::Drop),
            (Ending::Failed(&refused), Fate::DropAllIdle),
            (Ending::Failed(&reset), Fate::DropAllIdle),
            (Ending::Failed(&garbled), Fate::DropAllIdle),
            (
                Ending::Failed(&sqlx::Error::PoolTimedOut),
                Fate::DropAllIdle,
            ),
            (
                Ending::Failed(&sqlx::Error::WorkerCrashed),
                Fate::DropAllIdle,
            ),
        ] {
            assert_eq!(fate(ending), expected, "{ending:?}");
        }
    }

    #[test]
    fn only_a_refused_or_starting_server_is_connected_to_again() {
        assert!(worth_another_connect(&sqlx::Error::Io(io::Error::from(
            io::ErrorKind::ConnectionRefused
        ))));
        for error in [
            sqlx::Error::Io(io::Error::from(io::ErrorKind::ConnectionReset)),
            sqlx::Error::Io(io::Error::from(io::ErrorKind::PermissionDenied)),
            sqlx::Error::Protocol("unexpected message".to_owned()),
            sqlx::Error::Configuration("no host".into()),
        ] {
            assert!(!worth_another_connect(&error), "{error:?}");
        }
    }

    #[test]
    fn a_connection_too_long_idle_or_too_old_is_not_lent() {
        let opened = Instant::now();
        let minute = Duration::from_secs(60);
        let idle_bound = 5 * minute;
        for (since, now, max_lifetime, expected) in [
            (0, 0, None, true),
            (0, 5, None, true),
            (0, 6, None, false),
            (20, 25, None, true),
            (20, 25, Some(30), true),
            (20, 25, Some(24), false),
            (29, 31, Some(30), false),
        ] {
            let at = |minutes: u32| opened + minute * minutes;
            assert_eq!(
                lendable(
                    at(now),
                    at(since),
                    opened,
                    idle_bound,
                    max_lifetime.map(|m| minute * m)
                ),
                expected,
                "idle since minute {since}, at minute {now}, max lifetime {max_lifetime:?}"
            );
        }
    }

    /// Connections with `pool`'s settings and a lazy pool to `url` that waits `wait`.
    fn connections(url: &str, wait: Duration) -> Connections {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(wait)
            .max_connections(1)
            .connect_lazy(url)
            .expect("a lazy pool");
        Connections::new(pool)
    }

    /// A listener that accepts every connection and never says a word. Answers its URL.
    fn silent_server() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("an address").port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => held.push(stream),
                    Err(_) => break,
                }
            }
        });
        format!("postgres://toolgate:toolgate@127.0.0.1:{port}/toolgate")
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_waits_the_acquire_timeout_for_a_server_that_does_not_answer() {
        let conns = connections(&silent_server(), Duration::from_millis(700));
        let started = Instant::now();
        let err = conns.lease().await.err().expect("nothing answers");
        assert!(matches!(err, sqlx::Error::PoolTimedOut), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_connects_again_to_a_refusing_server_until_the_acquire_timeout() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("an address").port()
        };
        let url = format!("postgres://toolgate:toolgate@127.0.0.1:{port}/toolgate");
        let conns = connections(&url, Duration::from_millis(700));
        let started = Instant::now();
        let err = conns.lease().await.err().expect("nothing listens");
        assert!(matches!(err, sqlx::Error::PoolTimedOut), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test]
    async fn closed_connections_lend_nothing() {
        let conns = connections(&silent_server(), Duration::from_secs(5));
        conns.clone().close().await;
        let err = conns.lease().await.err().expect("closed");
        assert!(matches!(err, sqlx::Error::PoolClosed), "{err:?}");
        // A second close returns at once.
        conns.close().await;
    }

    #[test]
    fn a_store_error_names_the_sqlx_error_behind_it() {
        let unreachable = crate::error::store_error("claim a key", sqlx::Error::PoolTimedOut);
        assert!(matches!(
            sqlx_cause(&unreachable),
            Some(sqlx::Error::PoolTimedOut)
        ));
        let lost = StoreError::LostClaim {
            key: "k".to_owned(),
            attempt: 1,
        };
        assert!(sqlx_cause(&lost).is_none());
    }
}
