//! A fresh database per test on a real PostgreSQL server, found or started with no manual step.
//!
//! The harness of this workspace's tests that need PostgreSQL (the store's own, the facade's,
//! the benchmarks), as a dev-dependency. Not published: it starts and configures the machine's
//! PostgreSQL as root, which no library should do.
//!
//! [`test_database`] finds the server once per process:
//!
//! 1. `DATABASE_URL`, when set, names it: a server and database where the user may
//!    `CREATE DATABASE`. Nothing is started then.
//! 2. Otherwise the server on `127.0.0.1:5432`, as the role `toolgate` (password `toolgate`).
//!    When nothing answers there, the installed PostgreSQL cluster for that port is started
//!    (`pg_ctlcluster <version> <name> start`, which needs root, as CI and the project's machines
//!    have), for this run of the server with `fsync=off` (a test server need not survive a power
//!    cut; its configuration files are not changed). The role is created or reset through
//!    `runuser -u postgres -- psql`. A file lock keeps test processes that start together from
//!    doing this twice at once.
//!
//! When no server can be had, every test that asks for one fails with a message that says what
//! to install or set: a test never skips silently.
//!
//! A test that takes the server down and up (a database outage) uses [`OwnCluster`] instead: a
//! cluster of its own on a free port, created with `pg_createcluster`, stopped and started with
//! `pg_ctlcluster`, dropped with `pg_dropcluster --stop` when the value is dropped. It needs
//! Debian's PostgreSQL cluster tools and root, whatever `DATABASE_URL` says.
//!
//! A test that counts the round trips and commits a call costs puts a [`CountingProxy`] between
//! the store and the server.
//!
//! A test that races several OS processes on one database starts them with [`ChildTest`]: the
//! test binary runs one of its own tests again, in a child process it talks to in lines.

mod child;
mod cluster;
mod counting;
mod local_server;

pub use child::ChildTest;
pub use cluster::OwnCluster;
pub use counting::{CountingProxy, Tally};

use std::path::Path;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection};
use tokio::sync::OnceCell;

/// Every test database's name starts with it.
const PREFIX: &str = "toolgate_test_";

/// What a test needs and how to get it, said by every failure.
const HOW_TO_GET_A_SERVER: &str = "the PostgreSQL tests need a server: set DATABASE_URL to one \
     where the user may CREATE DATABASE (postgres://user:password@host:port/database), or \
     install PostgreSQL (Debian: `apt-get install postgresql`) and run the tests as root, so \
     that they start its cluster on port 5432 themselves (`pg_ctlcluster 15 main start`)";

/// How long a server that is still starting up may refuse connections.
const STARTING_UP: Duration = Duration::from_secs(30);

/// The server this process's tests use, found once.
static SERVER: OnceCell<Result<Server, String>> = OnceCell::const_new();

/// Tells this process's databases apart from those of an earlier process with the same id.
static PROCESS_NONCE: LazyLock<u128> = LazyLock::new(|| {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis())
});

/// Numbers this process's databases.
static NEXT_DATABASE: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
struct Server {
    /// Where to connect to create databases.
    admin_url: String,
}

/// Creates a fresh, empty database for one test and answers its URL.
///
/// Panics, failing the test, when no PostgreSQL server can be found or started; the message
/// says what to install or set. Safe to call from many tests, threads and processes at once.
/// Databases are not dropped when the test ends: the first test of a later run drops those whose
/// process has ended (on a local server; with `DATABASE_URL`, that server's owner does).
pub async fn test_database() -> String {
    let server = match SERVER.get_or_init(find_server).await {
        Ok(server) => server,
        Err(message) => panic!("{message}"),
    };
    let name = format!(
        "{PREFIX}{}_{}_{}",
        std::process::id(),
        *PROCESS_NONCE,
        NEXT_DATABASE.fetch_add(1, Ordering::Relaxed)
    );
    let mut conn = connect(&server.admin_url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sqlx::query(AssertSqlSafe(format!(r#"CREATE DATABASE "{name}""#)))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
    // The database exists whatever the goodbye does.
    let _ = conn.close().await;
    with_database(&server.admin_url, &name)
}

/// Finds the server: `DATABASE_URL`, or the local one, started if need be.
async fn find_server() -> Result<Server, String> {
    let given = std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty());
    let (admin_url, notes) = match given {
        Some(url) => (url, Vec::new()),
        None => {
            let notes = tokio::task::spawn_blocking(local_server::ensure)
                .await
                .map_err(|e| format!("finding the local PostgreSQL server panicked: {e}"))??;
            (local_server::URL.to_owned(), notes)
        }
    };
    let mut conn = connect(&admin_url).await.map_err(|e| {
        let notes: String = notes.iter().map(|note| format!("\n  - {note}")).collect();
        format!("{e}{notes}")
    })?;
    if admin_url == local_server::URL {
        drop_stale_databases(&mut conn).await;
    }
    let _ = conn.close().await;
    Ok(Server { admin_url })
}

/// A connection to `url`, waiting a bounded time for a server that is starting up.
async fn connect(url: &str) -> Result<PgConnection, String> {
    let deadline = tokio::time::Instant::now() + STARTING_UP;
    loop {
        match PgConnection::connect(url).await {
            Ok(conn) => return Ok(conn),
            // 57P03 cannot_connect_now: the server is starting up.
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("57P03")
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(format!(
                    "cannot connect to {}: {e}; {HOW_TO_GET_A_SERVER}",
                    redact(url)
                ));
            }
        }
    }
}

/// Drops the test databases of processes that have ended, so runs do not pile them up.
/// Best effort: a database in use or already dropped by another process is left alone.
async fn drop_stale_databases(conn: &mut PgConnection) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE starts_with(datname, $1)")
            .bind(PREFIX)
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    for name in names {
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = sqlx::query(AssertSqlSafe(format!(
            r#"DROP DATABASE IF EXISTS "{name}""#
        )))
        .execute(&mut *conn)
        .await;
    }
}

/// The id of the process that created the test database `name`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, rest) = rest.split_once('_')?;
    let (nonce, seq) = rest.split_once('_')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(nonce) && digits(seq)).then_some(())?;
    pid.parse().ok()
}

/// `url` with its database replaced by `database` (a plain identifier), query kept.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority = base.find("://").map_or(0, |at| at + 3);
    let path = base[authority..]
        .find('/')
        .map_or(base.len(), |at| authority + at);
    let mut out = format!("{}/{database}", &base[..path]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    let Some(authority) = url.find("://").map(|at| at + 3) else {
        return url.to_owned();
    };
    let end = url[authority..]
        .find(['/', '?'])
        .map_or(url.len(), |at| authority + at);
    match url[authority..end].rfind('@') {
        Some(at) => match url[authority..authority + at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..authority], &url[authority + at..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced_and_its_query_kept() {
        for (url, expected) in [
            (
                "postgres://u:p@127.0.0.1:5432/postgres",
                "postgres://u:p@127.0.0.1:5432/t1",
            ),
            ("postgres://u:p@host", "postgres://u:p@host/t1"),
            (
                "postgresql://u@host/db?sslmode=disable",
                "postgresql://u@host/t1?sslmode=disable",
            ),
            (
                "postgres:///db?host=/var/run/postgresql",
                "postgres:///t1?host=/var/run/postgresql",
            ),
        ] {
            assert_eq!(with_database(url, "t1"), expected, "{url}");
        }
    }

    #[test]
    fn messages_never_show_a_password() {
        assert_eq!(
            redact("postgres://u:secret@host:5432/db"),
            "postgres://u:***@host:5432/db"
        );
        assert_eq!(redact("postgres://u@host/db"), "postgres://u@host/db");
        assert_eq!(redact("postgres://host/db"), "postgres://host/db");
    }

    #[test]
    fn only_test_databases_name_their_process() {
        assert_eq!(owner_pid("toolgate_test_4242_1700000000000_7"), Some(4242));
        assert_eq!(owner_pid("toolgate_test_4242_x_7"), None);
        assert_eq!(owner_pid("toolgate_prod"), None);
        assert_eq!(owner_pid("postgres"), None);
    }
}
