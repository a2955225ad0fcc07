//! A PostgreSQL cluster of a test's own, which the test may stop and start to play a database
//! outage, dropped when the test ends, passed or failed.

use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::local_server::run;

/// What an outage test needs, said by every failure.
const HOW_TO_GET_CLUSTERS: &str = "the outage tests create, stop and drop a PostgreSQL cluster \
     of their own: install PostgreSQL with Debian's cluster tools (`apt-get install \
     postgresql`, which gives pg_createcluster, pg_ctlcluster and pg_dropcluster) and run the \
     tests as root";

/// Settings of the cluster for this run of it (see the harness's `FOR_TESTS`).
const FOR_TESTS: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";

/// Numbers this process's clusters.
static NEXT_CLUSTER: AtomicU64 = AtomicU64::new(0);

/// A cluster created for one test on a free port, with a role and database `toolgate`
/// (password `toolgate`) reachable over TCP. [`OwnCluster::stop`] and [`OwnCluster::start`]
/// take the server down and up; dropping it drops the cluster and its files
/// (`pg_dropcluster --stop`), also when the test panics.
#[derive(Debug)]
pub struct OwnCluster {
    version: String,
    name: String,
    port: u16,
}

impl OwnCluster {
    /// Creates and starts a new cluster of the newest installed PostgreSQL, and its role and
    /// database. Panics, failing the test, with what to install when PostgreSQL's cluster tools
    /// or root are missing: a test never skips.
    pub fn create() -> OwnCluster {
        let version = newest_version().unwrap_or_else(|e| panic!("{e}; {HOW_TO_GET_CLUSTERS}"));
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let name = format!(
            "toolgate_outage_{}_{nanos}_{}",
            std::process::id(),
            NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed)
        );
        let port = free_port();
        must(
            Command::new("pg_createcluster").args([&version, &name, "-p", &port.to_string()]),
            "create a cluster",
        );
        // From here on, a panic drops the cluster.
        let cluster = OwnCluster {
            version,
            name,
            port,
        };
        cluster.start();
        cluster.psql("CREATE ROLE toolgate LOGIN PASSWORD 'toolgate'");
        cluster.psql("CREATE DATABASE toolgate OWNER toolgate");
        cluster
    }

    /// `postgres://toolgate:toolgate@127.0.0.1:PORT/toolgate`.
    pub fn url(&self) -> String {
        format!(
            "postgres://toolgate:toolgate@127.0.0.1:{}/toolgate",
            self.port
        )
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) {
        must(
            Command::new("pg_ctlcluster").args([
                "--skip-systemctl-redirect",
                &self.version,
                &self.name,
                "start",
                "--",
                "-o",
                FOR_TESTS,
            ]),
            "start the cluster",
        );
    }

    /// Stops the server (fast shutdown: sessions are ended, connections refused) and waits
    /// until it is down.
    pub fn stop(&self) {
        must(
            Command::new("pg_ctlcluster").args([
                "--skip-systemctl-redirect",
                &self.version,
                &self.name,
                "stop",
            ]),
            "stop the cluster",
        );
    }

    /// Runs `sql` as the `postgres` superuser over the cluster's local socket.
    fn psql(&self, sql: &str) {
        must(
            Command::new("runuser").args([
                "-u",
                "postgres",
                "--",
                "psql",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-p",
                &self.port.to_string(),
                "-d",
                "postgres",
                "-c",
                sql,
            ]),
            "set up the role and database toolgate",
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let dropped =
            run(Command::new("pg_dropcluster").args(["--stop", &self.version, &self.name]));
        if let Err(e) = dropped {
            eprintln!(
                "could not drop the test cluster {} {}: {e}",
                self.version, self.name
            );
        }
    }
}

/// The newest PostgreSQL version with its server installed (`/usr/lib/postgresql/<version>`).
fn newest_version() -> Result<String, String> {
    let entries = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("no PostgreSQL server is installed (/usr/lib/postgresql: {e})"))?;
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| Some((name.parse::<u32>().ok()?, name)))
        .max()
        .map(|(_, name)| name)
        .ok_or_else(|| "no PostgreSQL server version is in /usr/lib/postgresql".to_owned())
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

/// Runs `command`, panicking with what it printed unless it succeeds.
fn must(command: &mut Command, doing: &str) {
    let shown = format!("{:?}", command);
    let output =
        run(command).unwrap_or_else(|e| panic!("cannot {doing}: {e}; {HOW_TO_GET_CLUSTERS}"));
    assert!(
        output.status.success(),
        "cannot {doing}: {shown} failed ({}): {}{}; {HOW_TO_GET_CLUSTERS}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim(),
        String::from_utf8_lossy(&output.stdout).trim(),
    );
}
