//! Which store to work on (`--store`, or `TOOLGATE_STORE`) and opening it.

use std::ffi::OsStr;
use std::path::PathBuf;

use toolgate_core::store::OperationStore;
use toolgate_store_postgres::PostgresStore;
use toolgate_store_sqlite::SqliteStore;

use crate::error::Failure;

/// The environment variable naming the store when `--store` is not given.
pub(crate) const STORE_ENV: &str = "TOOLGATE_STORE";

/// A store, as named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreSpec {
    /// `sqlite:PATH`: the application's SQLite file.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: a PostgreSQL database.
    Postgres(String),
}

/// The store `given` names (`--store`, else `TOOLGATE_STORE`); empty names none.
pub(crate) fn spec(given: Option<&OsStr>) -> Result<StoreSpec, Failure> {
    let Some(given) = given.filter(|given| !given.is_empty()) else {
        return Err(Failure::usage(
            "no store given",
            "toolgate works on the application's operation store and was not told where it is",
            format!(
                "give --store sqlite:PATH or --store postgres://USER@HOST/DATABASE, or set {STORE_ENV}"
            ),
        ));
    };
    // The value is not shown: it may be a URL with a password.
    let Some(text) = given.to_str() else {
        return Err(Failure::usage(
            "the store is not text",
            format!("the value of --store or {STORE_ENV} is not valid UTF-8"),
            format!("give --store a UTF-8 value, or set {STORE_ENV} to one"),
        ));
    };
    if let Some(path) = text.strip_prefix("sqlite:") {
        if path.is_empty() {
            return Err(Failure::usage(
                "the store `sqlite:` names no file",
                "a SQLite store is a file",
                "give --store sqlite:PATH, the path of the application's store file",
            ));
        }
        return Ok(StoreSpec::Sqlite(PathBuf::from(path)));
    }
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return Ok(StoreSpec::Postgres(text.to_owned()));
    }
    Err(Failure::usage(
        format!(
            "the store `{}` is neither SQLite nor PostgreSQL",
            redact(text)
        ),
        "a store is named `sqlite:PATH` or `postgres://…`",
        "give --store sqlite:PATH or --store postgres://USER:PASSWORD@HOST:PORT/DATABASE",
    ))
}

/// An open store.
pub(crate) enum Opened {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database.
    Postgres(PostgresStore),
}

impl Opened {
    /// The store.
    pub(crate) fn store(&self) -> &dyn OperationStore {
        match self {
            Opened::Sqlite(store) => store,
            Opened::Postgres(store) => store,
        }
    }

    /// Closes its connections, waiting for the writes in flight.
    pub(crate) async fn close(self) {
        match self {
            Opened::Sqlite(store) => store.close().await,
            Opened::Postgres(store) => store.close().await,
        }
    }
}

/// Opens the store, applying its migrations (as the application does at start-up). A SQLite
/// file that does not exist is an error, not a new empty store.
pub(crate) async fn open(spec: &StoreSpec) -> Result<Opened, Failure> {
    match spec {
        StoreSpec::Sqlite(path) => {
            if !path.is_file() {
                return Err(Failure::Store(crate::error::Explained {
                    what: format!("no store at {}", path.display()),
                    why: "there is no such file; toolgate opens the application's store and never creates one".to_owned(),
                    next: "give --store sqlite:PATH with the path of the file the application writes its operations to".to_owned(),
                }));
            }
            let store = SqliteStore::open(path).await.map_err(|e| {
                Failure::store(&format!("open the SQLite store {}", path.display()), &e)
            })?;
            Ok(Opened::Sqlite(store))
        }
        StoreSpec::Postgres(url) => {
            let store = PostgresStore::connect(url).await.map_err(|e| {
                Failure::store(&format!("open the PostgreSQL store {}", redact(url)), &e)
            })?;
            Ok(Opened::Postgres(store))
        }
    }
}

/// `url` with the password of its user information, if any, replaced by `***`: what an error
/// may show.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> Result<StoreSpec, Failure> {
        spec(Some(OsStr::new(text)))
    }

    #[test]
    fn sqlite_and_postgres_stores_are_named() {
        assert_eq!(
            named("sqlite:/tmp/a.db").unwrap(),
            StoreSpec::Sqlite("/tmp/a.db".into())
        );
        assert_eq!(
            named("postgresql://u@h/db").unwrap(),
            StoreSpec::Postgres("postgresql://u@h/db".into())
        );
        assert_eq!(
            named("sqlite:relative/ops.db").unwrap(),
            StoreSpec::Sqlite("relative/ops.db".into())
        );
    }

    #[test]
    fn a_missing_or_unknown_store_is_a_usage_error() {
        for given in [
            None,
            Some(""),
            Some("sqlite:"),
            Some("/tmp/ops.db"),
            Some("mysql://u:secret@h/db"),
        ] {
            let err = spec(given.map(OsStr::new)).expect_err("not a store");
            assert_eq!(err.exit_code(), 2, "{given:?}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_store_that_is_not_text_is_a_usage_error_that_hides_it() {
        use std::os::unix::ffi::OsStrExt;

        let given = OsStr::from_bytes(b"postgres://u:secret\xff@h/db");
        let err = spec(Some(given)).expect_err("not text");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("TOOLGATE_STORE"), "{err}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("postgres://toolgate:s3cr@t@db:5432/toolgate"),
            "postgres://toolgate:***@db:5432/toolgate"
        );
        assert_eq!(
            redact("postgres://toolgate@db/x"),
            "postgres://toolgate@db/x"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact("sqlite:/tmp/a"), "sqlite:/tmp/a");
    }
}
