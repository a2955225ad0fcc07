//! The arguments of `console`.

use std::net::SocketAddr;

use clap::Args;

/// `console`: where it listens.
#[derive(Debug, PartialEq, Eq, Args)]
#[command(after_help = CONSOLE_AFTER_HELP)]
pub(crate) struct ConsoleArgs {
    /// The address and port to listen on (an IP address, or localhost); loopback unless you
    /// give another
    #[arg(
        long,
        value_name = "ADDRESS:PORT",
        default_value = "127.0.0.1:8080",
        value_parser = listen_address
    )]
    pub(crate) listen: SocketAddr,
}

/// `ADDRESS:PORT` as an IP address and port; `localhost:PORT` is `127.0.0.1:PORT`. No other name
/// is looked up: where the console listens is never up to a resolver.
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{port:?} is not a port (0 to 65535), as in localhost:8080"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        "give an IP address and a port, such as 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080 or localhost:8080"
            .to_owned()
    })
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
