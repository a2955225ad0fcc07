//! The flags of `mcp_server`: where the operations are kept, which payment provider the tools
//! call, and who the clients are (on stdio, the process's one identity; over HTTP, a table of
//! bearer tokens).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toolgate::AuthContext;

pub(crate) const USAGE: &str = "usage: mcp_server [--db PATH] [--provider-url URL] \
     [--provider-timeout-ms N] [--approvals-every-ms N] [--no-additional-properties] \
     [--tenant T] [--user U] [--permission P]... \
     | [--http HOST:PORT --token TOKEN=TENANT:USER:PERMISSION,...]...\n\
     Serves the demo shop's tools over MCP: on stdio by default, as the client that started the \
     process (--tenant acme --user desk, with orders:read, refund:create and crm:write unless \
     --permission says otherwise); with --http, over streamable HTTP, each request identified by \
     its bearer token (one --token per client). --no-additional-properties serves the tools' \
     schemas without `additionalProperties`, for clients that cannot read it (google-genai's MCP \
     bridge); an argument a tool does not take is still refused. --approvals-every-ms (default \
     1000) is how often the runner of approved operations looks for refunds a manager approved.";

/// How often the runner of approved operations looks for approved refunds, unless
/// `--approvals-every-ms` says otherwise.
pub(crate) const DEFAULT_APPROVALS_EVERY: Duration = Duration::from_secs(1);

/// The stdio client's permissions when no `--permission` is given: every tool of the shop.
const DEFAULT_PERMISSIONS: [&str; 3] = ["orders:read", "refund:create", "crm:write"];

/// How `mcp_server` runs.
#[derive(Debug)]
pub(crate) struct Flags {
    /// The SQLite file of the operations.
    pub(crate) db: PathBuf,
    /// A payment provider already running, instead of one started in process.
    pub(crate) provider_url: Option<String>,
    /// How long the tools wait for the provider.
    pub(crate) provider_timeout: Duration,
    /// How often the runner of approved operations looks for approved refunds.
    pub(crate) approvals_every: Duration,
    /// Whether the schemas served keep their `additionalProperties` (not for clients that
    /// cannot read them).
    pub(crate) additional_properties: bool,
    /// Where and for whom it serves.
    pub(crate) serve: Serve,
}

/// Where the server serves, and who its clients are.
#[derive(Debug)]
pub(crate) enum Serve {
    /// The process's stdin and stdout, for the client that started it.
    Stdio(AuthContext),
    /// Streamable HTTP on `addr`, each request identified by its bearer token.
    Http {
        /// The address to listen on (port 0: a free one).
        addr: SocketAddr,
        /// Each token and who it identifies, in the order given.
        tokens: Vec<(String, AuthContext)>,
    },
}

/// The flags in `args`; `None` for `--help`; what is wrong with them otherwise.
pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Flags>, String> {
    let mut db = None;
    let mut provider_url = None;
    let mut provider_timeout = Duration::from_millis(2000);
    let mut approvals_every = DEFAULT_APPROVALS_EVERY;
    let mut http = None;
    let mut tokens = Vec::new();
    let mut tenant = None;
    let mut user = None;
    let mut permissions = Vec::new();
    let mut additional_properties = true;
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(None);
        }
        if arg == "--no-additional-properties" {
            additional_properties = false;
            continue;
        }
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => {
                let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
                (arg, value)
            }
        };
        match name.as_str() {
            "--db" => db = Some(PathBuf::from(non_empty(&name, value)?)),
            "--provider-url" => provider_url = Some(value),
            "--provider-timeout-ms" => match value.parse::<u64>() {
                Ok(0) => return Err("--provider-timeout-ms must be above 0".to_owned()),
                Ok(ms) => provider_timeout = Duration::from_millis(ms),
                Err(_) => {
                    return Err(format!(
                        "--provider-timeout-ms takes a whole number, not `{value}`"
                    ));
                }
            },
            "--approvals-every-ms" => match value.parse::<u64>() {
                Ok(0) => return Err("--approvals-every-ms must be above 0".to_owned()),
                Ok(ms) => approvals_every = Duration::from_millis(ms),
                Err(_) => {
                    return Err(format!(
                        "--approvals-every-ms takes a whole number, not `{value}`"
                    ));
                }
            },
            "--http" => {
                let addr = value.parse::<SocketAddr>().map_err(|_| {
                    format!("--http takes an address such as 127.0.0.1:8080, not `{value}`")
                })?;
                http = Some(addr);
            }
            "--token" => tokens.push(token(&value)?),
            "--tenant" => tenant = Some(non_empty(&name, value)?),
            "--user" => user = Some(non_empty(&name, value)?),
            "--permission" => permissions.push(non_empty(&name, value)?),
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    let serve = match http {
        Some(addr) => {
            if tenant.is_some() || user.is_some() || !permissions.is_empty() {
                return Err(
                    "--tenant, --user and --permission say who the stdio client is; \
                     over --http, each --token says who its client is"
                        .to_owned(),
                );
            }
            if tokens.is_empty() {
                return Err(
                    "--http needs at least one --token TOKEN=TENANT:USER:PERMISSIONS: \
                     every HTTP request is identified by its bearer token"
                        .to_owned(),
                );
            }
            let mut seen = HashSet::new();
            if let Some((_, auth)) = tokens.iter().find(|(token, _)| !seen.insert(token.clone())) {
                return Err(format!(
                    "two --token flags give the same token (the second for {}:{}): each token \
                     identifies one client",
                    auth.tenant(),
                    auth.user()
                ));
            }
            Serve::Http { addr, tokens }
        }
        None => {
            if !tokens.is_empty() {
                return Err("--token identifies HTTP clients: give --http HOST:PORT too".to_owned());
            }
            if permissions.is_empty() {
                permissions = DEFAULT_PERMISSIONS.map(str::to_owned).to_vec();
            }
            let auth = AuthContext::new(
                tenant.unwrap_or_else(|| "acme".to_owned()),
                user.unwrap_or_else(|| "desk".to_owned()),
            )
            .with_permissions(permissions);
            Serve::Stdio(auth)
        }
    };
    Ok(Some(Flags {
        db: db.unwrap_or_else(|| std::env::temp_dir().join("toolgate-mcp-shop.db")),
        provider_url,
        additional_properties,
        provider_timeout,
        approvals_every,
        serve,
    }))
}

/// `value`, unless it is empty.
fn non_empty(name: &str, value: String) -> Result<String, String> {
    if value.is_empty() {
        return Err(format!("{name} needs a value that is not empty"));
    }
    Ok(value)
}

/// A `--token` value, `TOKEN=TENANT:USER:PERMISSION,…` (the permissions may be left out).
fn token(value: &str) -> Result<(String, AuthContext), String> {
    let form = "write --token TOKEN=TENANT:USER:PERMISSION,PERMISSION";
    let (token, who) = value
        .split_once('=')
        .ok_or_else(|| format!("a --token has no `=`: {form}"))?;
    if token.is_empty() || !token.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(format!(
            "a --token's token must be visible ASCII without spaces, as an HTTP header carries it: {form}"
        ));
    }
    let mut parts = who.splitn(3, ':');
    let tenant = parts.next().unwrap_or_default();
    let user = parts.next().unwrap_or_default();
    if tenant.is_empty() || user.is_empty() {
        return Err(format!("a --token names no tenant or no user: {form}"));
    }
    let permissions = parts
        .next()
        .unwrap_or_default()
        .split(',')
        .filter(|permission| !permission.is_empty());
    Ok((
        token.to_owned(),
        AuthContext::new(tenant, user).with_permissions(permissions),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Result<Option<Flags>, String> {
        parse(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn stdio_is_the_default_with_an_identity_that_can_use_the_shop() {
        let parsed = flags(&["--db", "shop.db"]).unwrap().unwrap();
        assert_eq!(parsed.db, PathBuf::from("shop.db"));
        assert_eq!(parsed.provider_timeout, Duration::from_millis(2000));
        assert_eq!(parsed.approvals_every, DEFAULT_APPROVALS_EVERY);
        assert!(parsed.additional_properties, "the full schemas by default");
        let often = flags(&["--approvals-every-ms", "50"]).unwrap().unwrap();
        assert_eq!(often.approvals_every, Duration::from_millis(50));
        let without = flags(&["--no-additional-properties", "--db", "shop.db"])
            .unwrap()
            .unwrap();
        assert!(!without.additional_properties);
        assert_eq!(without.db, PathBuf::from("shop.db"));
        let Serve::Stdio(auth) = parsed.serve else {
            panic!("stdio by default");
        };
        assert_eq!((auth.tenant(), auth.user()), ("acme", "desk"));
        assert_eq!(
            auth.permissions().collect::<Vec<_>>(),
            ["crm:write", "orders:read", "refund:create"]
        );

        let parsed = flags(&[
            "--tenant=globex",
            "--user",
            "ann",
            "--permission",
            "orders:read",
        ])
        .unwrap()
        .unwrap();
        let Serve::Stdio(auth) = parsed.serve else {
            panic!("stdio");
        };
        assert_eq!((auth.tenant(), auth.user()), ("globex", "ann"));
        assert_eq!(auth.permissions().collect::<Vec<_>>(), ["orders:read"]);
        assert!(flags(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn http_takes_a_table_of_tokens() {
        let parsed = flags(&[
            "--http",
            "127.0.0.1:0",
            "--token",
            "t1=acme:desk:orders:read,refund:create",
            "--token=t2=globex:bot",
        ])
        .unwrap()
        .unwrap();
        let Serve::Http { addr, tokens } = parsed.serve else {
            panic!("http");
        };
        assert_eq!(addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(tokens[0].0, "t1");
        assert_eq!(
            tokens[0].1,
            AuthContext::new("acme", "desk").with_permissions(["orders:read", "refund:create"])
        );
        assert_eq!(
            tokens[1],
            ("t2".to_owned(), AuthContext::new("globex", "bot"))
        );
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        for (args, needle) in [
            (
                &["--http", "8080", "--token", "t=a:b"][..],
                "an address such as",
            ),
            (&["--http", "127.0.0.1:0"][..], "needs at least one --token"),
            (&["--token", "t=a:b"][..], "give --http"),
            (&["--http", "127.0.0.1:0", "--token", "t"][..], "has no `=`"),
            (
                &["--http", "127.0.0.1:0", "--token", "=a:b"][..],
                "visible ASCII",
            ),
            (
                &["--http", "127.0.0.1:0", "--token", "t u=a:b"][..],
                "visible ASCII",
            ),
            (
                &["--http", "127.0.0.1:0", "--token", "t=a"][..],
                "no tenant or no user",
            ),
            (
                &["--http", "127.0.0.1:0", "--token", "t=:b"][..],
                "no tenant or no user",
            ),
            (
                &[
                    "--http",
                    "127.0.0.1:0",
                    "--token",
                    "t=a:b",
                    "--token",
                    "t=c:d",
                ][..],
                "the same token (the second for c:d)",
            ),
            (
                &["--http", "127.0.0.1:0", "--token", "t=a:b", "--tenant", "x"][..],
                "each --token says",
            ),
            (&["--provider-timeout-ms", "0"][..], "above 0"),
            (&["--provider-timeout-ms", "soon"][..], "whole number"),
            (&["--approvals-every-ms", "0"][..], "above 0"),
            (&["--approvals-every-ms", "1s"][..], "whole number"),
            (&["--db", ""][..], "not empty"),
            (&["--db"][..], "needs a value"),
            (&["--verbose", "1"][..], "unknown flag"),
        ] {
            let err = flags(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
