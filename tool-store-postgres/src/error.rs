//! sqlx's errors in the store's words: a database that cannot be reached is told apart from one
//! that answered with an error.

use toolgate_core::store::StoreError;

/// The store's error for `error`, met while it tried to `doing` (a few words: "claim a key").
///
/// [`StoreError::Unreachable`] (transient, the sqlx error kept as its source) when no connection
/// could be had or kept (see [`is_unreachable`]); [`StoreError::Backend`] otherwise.
pub(crate) fn store_error(doing: &'static str, error: sqlx::Error) -> StoreError {
    if is_unreachable(&error) {
        StoreError::unreachable(doing, error)
    } else {
        StoreError::backend_with_source(format!("could not {doing}: {error}"), error)
    }
}

/// Whether `error` says the server could not be reached rather than that it refused the
/// statement:
///
/// - no connection within the pool's acquire timeout (`PoolTimedOut`), an I/O or TLS error (a
///   refused, reset or dropped connection), a crashed connection worker;
/// - SQLSTATE class `08` (connection exception), `57P01` admin shutdown, `57P02` crash shutdown,
///   `57P03` cannot connect now (starting up or shutting down) and `57P05` idle session timeout:
///   the session ended, and a new one may work in a moment.
///
/// `57P04` (the database was dropped) and a pool closed by the application are not transient.
pub(crate) fn is_unreachable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().as_deref().is_some_and(is_connection_sqlstate),
        _ => false,
    }
}

/// SQLSTATEs of a session that ended or could not begin, which a new session may not meet.
fn is_connection_sqlstate(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "57P05")
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[test]
    fn a_server_out_of_reach_is_transient_and_keeps_the_cause() {
        for error in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::Io(io::Error::from(io::ErrorKind::ConnectionRefused)),
            sqlx::Error::Io(io::Error::from(io::ErrorKind::UnexpectedEof)),
            sqlx::Error::WorkerCrashed,
        ] {
            let text = error.to_string();
            let err = store_error("claim a key", error);
            assert!(err.is_unreachable(), "{err:?}");
            let source = std::error::Error::source(&err).expect("the sqlx error is the source");
            assert_eq!(source.to_string(), text);
            assert!(err.to_string().contains("claim a key"), "{err}");
        }
    }

    #[test]
    fn connection_sqlstates_are_transient_and_others_not() {
        for code in [
            "08000", "08001", "08003", "08006", "08P01", "57P01", "57P02", "57P03",
        ] {
            assert!(is_connection_sqlstate(code), "{code}");
        }
        // Unique violation, serialization failure, database dropped, query canceled.
        for code in ["23505", "40001", "57P04", "57014"] {
            assert!(!is_connection_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn a_refused_statement_or_a_closed_pool_is_not_transient() {
        for error in [
            sqlx::Error::PoolClosed,
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("unexpected message".to_owned()),
        ] {
            let err = store_error("read a record", error);
            assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
            let source = std::error::Error::source(&err).expect("the sqlx error is the source");
            assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
        }
    }
}
