//! The chaos kit against a real HTTP provider on loopback: each fault of the proxy does what it
//! says (`faults`), faults take exactly the requests planned for them and the record says what
//! came (`planning`), what is not planned passes through unchanged (`passing`), the proxy stops
//! when told (`stopping`), and a tool under toolgate's dispatcher keeps its promise through the
//! proxy and through the hook (`dispatch`), stories played on a tool of one's own are checked
//! against its provider's ledger (`stories`), and storms of generated stories pass the tool done
//! right and catch the wrong ones with a short story that replays (`storm`).
//!
//! `upstream` is the provider, `client` the client a tool would have, with a deadline of its own.

mod acts;
mod client;
mod dispatch;
mod faults;
mod passing;
mod planning;
mod stopping;
mod stories;
mod storm;
mod upstream;

use std::time::Duration;

/// How long a test waits for something that should happen at once; reaching it is a failure.
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits for `what` at most [`PATIENCE`].
async fn patiently<T>(what: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, what)
        .await
        .expect("it happens well within the test's patience")
}
