//! [`PostgresStore`]: the [`OperationStore`] for many processes and machines on one database.

use sqlx::postgres::PgPool;
#[cfg(doc)]
use toolgate_core::store::OperationStore;
use toolgate_core::store::StoreError;

use crate::connect::PostgresOptions;
use crate::connections::Connections;
use crate::error::store_error;
use crate::migrate::migrator;

/// An [`OperationStore`] in a PostgreSQL database, shared safely by any number of processes
/// and machines.
///
/// One row a `(tenant, key)` in the table `toolgate_operations`, whose primary key is that
/// pair. A claim is one statement, one round trip: an `INSERT … ON CONFLICT DO NOTHING` that
/// also reads the record already under the key, so a new key is acquired and a replay answered
/// at once. Only a record the claim must change (`failed`, or an expired lease) is read again
/// `FOR UPDATE` and settled in a transaction, so two claims never both acquire. Every write of a
/// worker is one `UPDATE … WHERE state = 'processing' AND attempt = $n`: when no row matches,
/// the claim was lost and the write changes nothing.
///
/// Approvals are rows of `toolgate_approvals`. A claim over the threshold inserts its record
/// (`awaiting_approval`) and its approval in one transaction; a claim of a record that waits, or
/// was rejected, reads the record and then its approval `FOR UPDATE`, and a decision, an expiry
/// and a revalidation's rejection take the same two locks in the same order. So an approved
/// operation is run by exactly one claim, whichever process makes it, and a claim acts on the
/// decisions committed before it. The audit trail is `toolgate_audit`, appended one row at a time and numbered
/// by an identity column. A run's ledger is one row a run in
/// `toolgate_runs` (with its attempts and failed calls beside it), changed under that row's
/// lock.
///
/// An outbox operation is claimed inside a transaction that stays open while the tool's body
/// writes its rows (see [`connection`](crate::connection)): its uncommitted record, or the row
/// lock of a record taken again, holds every other claim of the key until the transaction ends.
/// Its event, in `toolgate_outbox` under the operation's key, is inserted by the commit. The
/// transaction holds one of the store's connections while the body runs: count the outbox calls
/// that run at once in `max_connections`, besides the other statements. Workers
/// lease events with one `UPDATE … FOR UPDATE SKIP LOCKED`, so two never hold the same one, and
/// settle an event and its operation in one transaction fenced by the event's attempt. Steps are
/// rows of `toolgate_steps`, begun and finished under the lock of their operation's row.
///
/// Cloning is cheap: clones share the store's connections. Every statement runs on one of
/// them (see [the crate's docs](crate#connections)), not on the pool the store was made with.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolgate_core::store::OperationStore;
/// use toolgate_store_postgres::PostgresStore;
///
/// # async fn run() -> Result<(), toolgate_core::store::StoreError> {
/// let store = PostgresStore::connect("postgres://toolgate:secret@db.internal/toolgate").await?;
/// let store: Arc<dyn OperationStore> = Arc::new(store);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(crate) conns: Connections,
}

impl PostgresStore {
    /// Connects a pool to the database at `url` (`postgres://user:password@host:port/database`)
    /// and applies the store's migrations, which is safe while other processes do the same.
    ///
    /// A statement waits at most [`DEFAULT_ACQUIRE_TIMEOUT`](crate::DEFAULT_ACQUIRE_TIMEOUT)
    /// for a connection, then fails with [`StoreError::Unreachable`]; [`PostgresStore::options`]
    /// sets another wait.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::options(url).connect().await
    }

    /// The settings of a connection to `url`, to change before [`PostgresOptions::connect`].
    pub fn options(url: &str) -> PostgresOptions {
        PostgresOptions::new(url)
    }

    /// A store on a pool the application configured itself. Applies no migration: call
    /// [`PostgresStore::migrate`] once at start-up (or use [`PostgresStore::connect`]).
    ///
    /// The store takes the pool's settings and opens its own connections with them (see
    /// [the crate's docs](crate#connections)): at most `max_connections` at once, each statement
    /// waiting at most `acquire_timeout` for one, an idle one closed after `idle_timeout`
    /// (5 minutes when the pool has none) or `max_lifetime`. It runs none of its statements on
    /// the pool's connections, and the pool's hooks (`after_connect`, `before_acquire`,
    /// `after_release`) and `min_connections` do not apply to its own. A pool made with
    /// `connect_lazy` opens nothing, and the store opens its first connection for its first
    /// statement.
    pub fn from_pool(pool: PgPool) -> PostgresStore {
        PostgresStore {
            conns: Connections::new(pool),
        }
    }

    /// Applies the migrations this version of the store needs and that the database lacks.
    ///
    /// Safe to call again and from many processes at once: it waits for a PostgreSQL advisory
    /// lock on the database, and applies each migration once. Its bookkeeping is the table
    /// `_toolgate_store_migrations`, apart from any migrations of the application's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        // `run_direct` on the lease's connection, not `run` (generic over `Acquire`), whose future
        // the compiler cannot prove `Send` for every lifetime: `connect` would not compile inside
        // `tokio::spawn`.
        let applied = migrator().run_direct(None, lease.conn(), false).await;
        if applied.is_ok() {
            lease.done().await;
        }
        // Otherwise the lease is dropped with its session: a failed run can leave the advisory
        // lock held by the session, and the lock dies with it.
        applied.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e)
            | sqlx::migrate::MigrateError::ExecuteMigration(e, _) => {
                store_error("migrate the store", e)
            }
            other => {
                StoreError::backend_with_source(format!("cannot migrate the store: {other}"), other)
            }
        })
    }

    /// The pool the store was made with: the settings of the store's connections, and a pool
    /// for the application's own statements, apart from the store's connections.
    pub fn pool(&self) -> &PgPool {
        self.conns.pool()
    }

    /// Opens a connection now (or finds one idle), kept for the statements to come.
    pub(crate) async fn connected(&self) -> Result<(), sqlx::Error> {
        self.conns.lease().await?.done().await;
        Ok(())
    }

    /// Closes every connection of this store and its clones, waiting for the statements in
    /// flight, and the pool it was made with. Dropping the last clone closes them too; every
    /// committed write is in the database either way.
    pub async fn close(&self) {
        self.conns.close().await;
        self.conns.pool().close().await;
    }
}

/// A failed statement in the store's words: [`StoreError::Unreachable`] when the server could not
/// be reached (see `error::is_unreachable`), [`StoreError::Backend`] otherwise.
pub(crate) fn backend(error: sqlx::Error) -> StoreError {
    store_error("run a statement on PostgreSQL", error)
}
