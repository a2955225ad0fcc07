//! How a [`PostgresStore`] connects: the settings of [`PostgresStore::options`], with a bounded
//! wait for a connection.
//!
//! The settings are those of a sqlx pool ([`PostgresOptions::pool_options`]), which the store
//! keeps as the holder of its settings. The store opens and keeps its own connections with them
//! (`connections.rs`), and checks none when it lends it to a statement or takes it back: sqlx's
//! pool pings a connection both times, two round trips more for every statement, when a failed
//! statement says already that its connection is gone (the store answers
//! [`StoreError::Unreachable`] and the dispatcher tries again). A connection whose statement was
//! cut short, or that failed itself, is closed instead of lent again.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use toolgate_core::store::StoreError;

use crate::PostgresStore;
use crate::error::store_error;

/// How long a statement waits for a connection before the store answers
/// [`StoreError::Unreachable`]: 3 seconds.
///
/// The wait covers waiting for one of the store's connections while all are lent, taking an
/// idle one and, when none is idle, opening one (tried again while the server refuses
/// connections or is starting up, as sqlx's pool does). sqlx's own
/// default is 30 seconds, which would hold every call for half a minute while the database is
/// down; the dispatcher retries an unreachable store itself, a few times within the call's
/// budget, so each wait is kept short. Set it with [`PostgresOptions::acquire_timeout`].
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings for [`PostgresStore::connect`], made by [`PostgresStore::options`].
///
/// ```no_run
/// use std::time::Duration;
/// use toolgate_store_postgres::PostgresStore;
///
/// # async fn run() -> Result<(), toolgate_core::store::StoreError> {
/// let store = PostgresStore::options("postgres://toolgate:secret@db.internal/toolgate")
///     .acquire_timeout(Duration::from_secs(1))
///     .connect()
///     .await?;
/// # let _ = store;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    url: String,
    acquire_timeout: Duration,
    max_connections: Option<u32>,
}

impl PostgresOptions {
    pub(crate) fn new(url: &str) -> Self {
        PostgresOptions {
            url: url.to_owned(),
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            max_connections: None,
        }
    }

    /// How long a statement waits for a connection (one lent back, or a new one opened), then
    /// fails with [`StoreError::Unreachable`] (default [`DEFAULT_ACQUIRE_TIMEOUT`]).
    /// An outbox transaction waits for its connection as a statement does.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The most connections the store holds open at once (default: sqlx's, 10): as many
    /// statements and outbox transactions run at once, and the others wait for one of them
    /// to end, at most the acquire timeout.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = Some(max);
        self
    }

    /// The pool's settings, for a store on a pool that connects on first use
    /// ([`PostgresStore::from_pool`] with `pool_options().connect_lazy(url)`).
    pub fn pool_options(&self) -> PgPoolOptions {
        let options = PgPoolOptions::new().acquire_timeout(self.acquire_timeout);
        match self.max_connections {
            Some(max) => options.max_connections(max),
            None => options,
        }
    }

    /// Connects and applies the store's migrations. While the server cannot be reached, fails
    /// with [`StoreError::Unreachable`] after the acquire timeout.
    ///
    /// The store's first connection is opened here, and kept for its statements; the pool
    /// opens none.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let pool = self
            .pool_options()
            .connect_lazy(&self.url)
            .map_err(|e| store_error("connect to PostgreSQL", e))?;
        let store = PostgresStore::from_pool(pool);
        store
            .connected()
            .await
            .map_err(|e| store_error("connect to PostgreSQL", e))?;
        store.migrate().await?;
        Ok(store)
    }
}
