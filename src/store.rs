//! Where write operations are recorded: the [`OperationStore`] trait, its capabilities (`use
//! toolgate::store::prelude::*;` to call their methods) and its records, and the
//! stores themselves behind the crate's features.
//!
//! | feature | store | for |
//! |---|---|---|
//! | `sqlite` | `SqliteStore` (`SqliteStore::open(path)`) | one process, one durable file |
//! | `postgres` | `PostgresStore` (`PostgresStore::connect(url)`) | many processes and machines on one database |
//!
//! Both are configured alike (`options(…)`, then `open()` or `connect()`), migrate their schema
//! when opened, and `close()` their connections; hand one to
//! [`DispatcherBuilder::store`](crate::dispatch::DispatcherBuilder::store).

#[doc(inline)]
pub use toolgate_core::store::*;

#[cfg(feature = "sqlite")]
#[doc(inline)]
pub use toolgate_store_sqlite::{DEFAULT_BUSY_TIMEOUT, SqliteOptions, SqliteStore};

#[cfg(feature = "postgres")]
#[doc(inline)]
pub use toolgate_store_postgres::{DEFAULT_ACQUIRE_TIMEOUT, PostgresOptions, PostgresStore};
