//! The arguments of `console`.

use std::net::SocketAddr;

use clap::Args;

/// `console`: where it listens.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(after_help = CONSOLE_AFTER_HELP)]
pub(crate) struct ConsoleArgs {
    /// The address and port to listen on; loopback unless you give another
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,
}

const CONSOLE_AFTER_HELP: &str = "\
The console serves the store given with --store (or TOOLGATE_STORE) until Ctrl-C. Its first
line on stdout is its address. Operators sign in with a token an issuer of their tenant signed
(`toolgate operators issue`), and see and act on their own tenant only: approve or reject
approvals (with the approval's permission), settle unknown outcomes (ops:settle), resume dead
outbox events (outbox:resume). Every action is checked and audited as the same command's.

On loopback (the default, 127.0.0.1:8080) only this machine reaches it. --listen 0.0.0.0:8080
serves every interface: the console speaks plain HTTP, so put it behind a proxy that terminates
TLS. Sessions live in the console's memory: stopping it signs everyone out.";
