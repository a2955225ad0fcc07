//! The `Origin` check of the streamable HTTP transport: a browser page of a foreign origin must
//! not reach a local server (DNS rebinding), so a request whose `Origin` is not allowed is
//! answered `403 Forbidden`. Requests without an `Origin` (every client that is not a browser)
//! pass.

/// The origins allowed by default: loopback pages, on any port, over `http` and `https`.
pub(crate) const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// The allowed origins, each `SCHEME://HOST` (the scheme's default port only),
/// `SCHEME://HOST:PORT`, `SCHEME://HOST:*` (any port), `null` (a page of no origin) or `*`
/// (any origin: no check).
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    allowed: Vec<Allowed>,
    any: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    Null,
    Origin {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

/// An origin as a browser sends it: scheme, host and port (the scheme's default when absent).
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origins {
    /// The origins of `entries`, or why one of them cannot be read.
    pub(crate) fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let mut origins = Origins {
            allowed: Vec::new(),
            any: false,
        };
        for entry in entries {
            let entry = entry.as_ref().trim();
            match entry {
                "*" => origins.any = true,
                "null" => origins.allowed.push(Allowed::Null),
                _ => {
                    let (scheme, host, port) = split(entry).ok_or_else(|| {
                        format!(
                            "the allowed origin {entry:?} is not SCHEME://HOST, SCHEME://HOST:PORT, \
                             SCHEME://HOST:*, null or *"
                        )
                    })?;
                    let port = match port {
                        Some("*") => None,
                        Some(port) => Some(port.parse().map_err(|_| {
                            format!("the port of the allowed origin {entry:?} is not a number")
                        })?),
                        None => default_port(&scheme),
                    };
                    origins.allowed.push(Allowed::Origin { scheme, host, port });
                }
            }
        }
        Ok(origins)
    }

    /// Whether a request with the `Origin` header `value` may pass.
    pub(crate) fn allow(&self, value: &str) -> bool {
        if self.any {
            return true;
        }
        let value = value.trim();
        if value == "null" {
            return self.allowed.contains(&Allowed::Null);
        }
        let Some(origin) = parse_origin(value) else {
            return false;
        };
        self.allowed.iter().any(|allowed| match allowed {
            Allowed::Null => false,
            Allowed::Origin { scheme, host, port } => {
                *scheme == origin.scheme
                    && *host == origin.host
                    && port.is_none_or(|port| Some(port) == origin.port)
            }
        })
    }
}

/// `SCHEME://HOST[:PORT]` in parts, scheme and host in lower case; `None` when it is not that.
fn split(text: &str) -> Option<(String, String, Option<&str>)> {
    let (scheme, rest) = text.split_once("://")?;
    if scheme.is_empty() || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (inside, after) = bracketed.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (format!("[{inside}]"), port)
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (rest.to_owned(), None),
        }
    };
    if host.is_empty() || port == Some("") {
        return None;
    }
    Some((scheme.to_ascii_lowercase(), host.to_ascii_lowercase(), port))
}

/// An `Origin` header's value, its port the scheme's default when absent.
fn parse_origin(value: &str) -> Option<Origin> {
    let (scheme, host, port) = split(value)?;
    let port = match port {
        Some(port) => Some(port.parse().ok()?),
        None => default_port(&scheme),
    };
    Some(Origin { scheme, host, port })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_pages_pass_on_any_port_and_others_do_not() {
        let origins = Origins::new(LOOPBACK_ORIGINS).unwrap();
        for allowed in [
            "http://localhost:3000",
            "http://LOCALHOST",
            "https://127.0.0.1:8443",
            "http://[::1]:5173",
        ] {
            assert!(origins.allow(allowed), "{allowed}");
        }
        for foreign in [
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.2",
            "null",
            "file://",
            "localhost:3000",
            "http://localhost:x",
            "",
        ] {
            assert!(!origins.allow(foreign), "{foreign}");
        }
    }

    #[test]
    fn an_entry_without_a_port_allows_the_default_port_only() {
        let origins =
            Origins::new(["https://app.example.com", "http://dev.example.com:8080"]).unwrap();
        assert!(origins.allow("https://app.example.com"));
        assert!(origins.allow("https://app.example.com:443"));
        assert!(!origins.allow("https://app.example.com:8443"));
        assert!(!origins.allow("http://app.example.com"));
        assert!(origins.allow("http://dev.example.com:8080"));
        assert!(!origins.allow("http://dev.example.com"));
    }

    #[test]
    fn null_and_any_are_allowed_only_when_listed() {
        assert!(Origins::new(["null"]).unwrap().allow("null"));
        let any = Origins::new(["*"]).unwrap();
        assert!(any.allow("https://anywhere.example") && any.allow("null"));
        assert!(
            !Origins::new(Vec::<String>::new())
                .unwrap()
                .allow("http://localhost")
        );
    }

    #[test]
    fn an_entry_that_is_not_an_origin_is_refused_with_what_to_write() {
        for entry in [
            "example.com",
            "https://example.com/path",
            "https://example.com:port",
        ] {
            let err = Origins::new([entry]).unwrap_err();
            assert!(err.contains(entry), "{err}");
        }
    }
}
