//! A statement on a connection of the store's own ([`Connections`]): leased for it, and ended
//! by its result, so that a statement cut short or a connection that failed is never lent
//! again. `query.execute_on(&conns)` reads as `query.execute(&pool)` did.
//!
//! These are traits of the store's rather than an implementation of sqlx's `Executor` for
//! `&Connections`: that trait has a required method (`describe`) only when sqlx's `offline`
//! feature is on, which any crate of the application may turn on (sqlx's `macros` does), so an
//! implementation outside sqlx compiles either with that feature or without it, never both; and
//! turning it on here would break sqlx's other drivers (SQLite, MySQL) built without it.

use std::future::Future;

use sqlx::postgres::{PgArguments, PgQueryResult, PgRow};
use sqlx::query::{Query, QueryScalar};
use sqlx::{FromRow, Postgres};

use crate::connections::{Connections, ending};

/// Runs `$statement` (an expression using the connection `$conn`) on a lease of `$conns`, and
/// ends the lease with its result.
macro_rules! on_lease {
    ($conns:expr, |$conn:ident| $statement:expr) => {{
        let mut lease = $conns.lease().await?;
        let $conn = lease.conn();
        let result = $statement.await;
        lease.end(ending(&result)).await;
        result
    }};
}

/// A statement that changes rows, run on a connection of the store's.
pub(crate) trait ExecuteOn {
    /// Runs the statement; answers how many rows it changed.
    fn execute_on(
        self,
        conns: &Connections,
    ) -> impl Future<Output = Result<PgQueryResult, sqlx::Error>> + Send;
}

/// A statement that reads rows, each as a [`FetchOn::Row`], run on a connection of the store's.
/// Its rows are all read before the lease ends.
pub(crate) trait FetchOn {
    /// What a row reads as: the row, or the value of its one column.
    type Row;

    /// The one row the statement answers; `RowNotFound` when it answers none.
    fn fetch_one_on(
        self,
        conns: &Connections,
    ) -> impl Future<Output = Result<Self::Row, sqlx::Error>> + Send;

    /// The row the statement answers, if any.
    fn fetch_optional_on(
        self,
        conns: &Connections,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send;

    /// Every row the statement answers.
    fn fetch_all_on(
        self,
        conns: &Connections,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send;
}

impl ExecuteOn for Query<'_, Postgres, PgArguments> {
    async fn execute_on(self, conns: &Connections) -> Result<PgQueryResult, sqlx::Error> {
        on_lease!(conns, |conn| self.execute(conn))
    }
}

impl FetchOn for Query<'_, Postgres, PgArguments> {
    type Row = PgRow;

    async fn fetch_one_on(self, conns: &Connections) -> Result<PgRow, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_one(conn))
    }

    async fn fetch_optional_on(self, conns: &Connections) -> Result<Option<PgRow>, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_optional(conn))
    }

    async fn fetch_all_on(self, conns: &Connections) -> Result<Vec<PgRow>, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_all(conn))
    }
}

impl<O> FetchOn for QueryScalar<'_, Postgres, O, PgArguments>
where
    O: Send + Unpin,
    (O,): Send + Unpin + for<'r> FromRow<'r, PgRow>,
{
    type Row = O;

    async fn fetch_one_on(self, conns: &Connections) -> Result<O, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_one(conn))
    }

    async fn fetch_optional_on(self, conns: &Connections) -> Result<Option<O>, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_optional(conn))
    }

    async fn fetch_all_on(self, conns: &Connections) -> Result<Vec<O>, sqlx::Error> {
        on_lease!(conns, |conn| self.fetch_all(conn))
    }
}
