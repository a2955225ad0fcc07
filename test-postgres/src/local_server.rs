//! The PostgreSQL server on this machine: found on port 5432, or started from its installed
//! cluster, with a password role the tests log in as over TCP.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::HOW_TO_GET_A_SERVER;

/// The local server, as the tests' role.
pub(super) const URL: &str = "postgres://toolgate:toolgate@127.0.0.1:5432/postgres";

const PORT: u16 = 5432;

/// How long a started cluster may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Settings of a server the tests start, for this run of it only (its configuration files are
/// not touched): a test server need not survive a power cut, and without flushing to disk a test
/// database is created and dropped in milliseconds instead of a second.
const FOR_TESTS: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";

/// Creates the tests' role, or resets it so that its password and rights are what [`URL`] needs.
/// Debian's `pg_hba.conf` lets a password role in over TCP from 127.0.0.1.
const ENSURE_ROLE: &str = "DO $$ BEGIN \
     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate') THEN \
       CREATE ROLE toolgate LOGIN CREATEDB PASSWORD 'toolgate'; \
     ELSE \
       ALTER ROLE toolgate LOGIN CREATEDB PASSWORD 'toolgate'; \
     END IF; \
     END $$";

/// Makes sure a server answers on 127.0.0.1:5432 with the tests' role, starting the installed
/// cluster when nothing answers. Answers notes on what could not be done but may not matter
/// (the role could not be set up, yet may exist); an error when no server can be had.
pub(super) fn ensure() -> Result<Vec<String>, String> {
    // Test processes that start together take turns; the lock goes with the file.
    let _turn = lock()?;
    if !answers() {
        start_cluster()?;
        let deadline = Instant::now() + READY_WITHIN;
        while !answers() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "the PostgreSQL cluster was started but nothing answers on 127.0.0.1:{PORT} \
                     after {READY_WITHIN:?} (see /var/log/postgresql/); {HOW_TO_GET_A_SERVER}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let mut notes = Vec::new();
    if let Err(note) = ensure_role() {
        notes.push(note);
    }
    Ok(notes)
}

/// Whether something accepts TCP connections on 127.0.0.1:5432.
fn answers() -> bool {
    let address = SocketAddr::from(([127, 0, 0, 1], PORT));
    TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_ok()
}

/// An exclusive lock on a file in the temporary directory, held until the file is dropped.
fn lock() -> Result<File, String> {
    let path = std::env::temp_dir().join("toolgate-postgres-testing.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .or_else(|_| File::open(&path))
        .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

/// Starts the installed cluster that listens on port 5432 (PostgreSQL 15's `main` on the
/// project's machines) with [`FOR_TESTS`], directly rather than through systemd, which would not
/// pass them on. "Already running" is no error: another process may have won the race.
fn start_cluster() -> Result<(), String> {
    let listed = run(Command::new("pg_lsclusters").arg("--no-header")).map_err(|e| {
        format!(
            "nothing answers on 127.0.0.1:{PORT} and PostgreSQL's cluster tools are missing \
                 (pg_lsclusters: {e}); {HOW_TO_GET_A_SERVER}"
        )
    })?;
    let clusters = String::from_utf8_lossy(&listed.stdout).into_owned();
    let Some((version, name)) = clusters.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [version, name, port, ..] if port == PORT.to_string() => Some((version, name)),
            _ => None,
        }
    }) else {
        return Err(format!(
            "nothing answers on 127.0.0.1:{PORT} and no installed PostgreSQL cluster uses that \
             port (pg_lsclusters: {:?}); create one (pg_createcluster 15 main) or \
             {HOW_TO_GET_A_SERVER}",
            clusters.trim()
        ));
    };
    let started = run(Command::new("pg_ctlcluster").args([
        "--skip-systemctl-redirect",
        version,
        name,
        "start",
        "--",
        "-o",
        FOR_TESTS,
    ]))
    .map_err(|e| format!("cannot run pg_ctlcluster: {e}; {HOW_TO_GET_A_SERVER}"))?;
    if started.status.success() || answers() {
        return Ok(());
    }
    Err(format!(
        "`pg_ctlcluster {version} {name} start` failed ({}): {}; {HOW_TO_GET_A_SERVER}",
        started.status,
        String::from_utf8_lossy(&started.stderr).trim()
    ))
}

/// Creates or resets the tests' role as the `postgres` superuser (peer authentication over the
/// local socket), which needs root.
fn ensure_role() -> Result<(), String> {
    let output = run(Command::new("runuser").args([
        "-u",
        "postgres",
        "--",
        "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        "postgres",
        "-c",
        ENSURE_ROLE,
    ]))
    .map_err(|e| format!("cannot run runuser to set up the role toolgate: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "could not set up the role toolgate as the postgres user ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// Runs `command` to the end with no input, from `/` (a `postgres` user may not enter the
/// working directory), and captures what it printed.
pub(super) fn run(command: &mut Command) -> Result<Output, String> {
    command
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => format!("{:?} is not installed", command.get_program()),
            _ => e.to_string(),
        })
}
