//! The headers a proxy never passes on: those of one connection, not of the request (RFC 9110,
//! section 7.6.1).

use http::HeaderMap;
use http::header::{CONNECTION, HeaderName, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE};
use http::header::{TRAILER, TRANSFER_ENCODING, UPGRADE};

/// The hop-by-hop headers every connection may carry, beside those its `Connection` names.
const HOP_BY_HOP: [&str; 3] = ["keep-alive", "proxy-connection", "http2-settings"];

/// Removes from `headers` the hop-by-hop headers and those the `Connection` header names.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        CONNECTION,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        TE,
        TRAILER,
        TRANSFER_ENCODING,
        UPGRADE,
    ] {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hop_by_hop_headers_go_and_the_others_stay() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, X-Hop"),
            ("connection", "x-other-hop"),
            ("keep-alive", "timeout=5"),
            ("x-hop", "1"),
            ("x-other-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("upgrade", "h2c"),
            ("proxy-authorization", "Basic eA=="),
            ("proxy-authenticate", "Basic"),
            ("proxy-connection", "keep-alive"),
            ("idempotency-key", "k1"),
            ("content-type", "application/json"),
            ("content-length", "2"),
            ("authorization", "Bearer t"),
            ("x-trace", "a"),
            ("x-trace", "b"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                value.parse().expect("a header value"),
            );
        }
        remove_hop_by_hop(&mut headers);
        let mut left: Vec<String> = headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "authorization: Bearer t",
                "content-length: 2",
                "content-type: application/json",
                "idempotency-key: k1",
                "x-trace: a",
                "x-trace: b",
            ]
        );
    }
}
