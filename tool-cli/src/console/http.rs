//! The console's requests and answers, as its pages see them: a request read whole (its query,
//! its form, its cookies), and an answer with the headers every page carries.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

/// The largest form the console reads: a sign-in token, or a reason or evidence an operator
/// typed, is far below it.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// What every answer says of itself: no script, style only from the console, forms only to it,
/// never framed, never cached, no referrer sent to another site (a same-origin one keeps the
/// `Origin` a posted form carries, which the console checks).
const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
];

/// A request, read whole.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    query: Vec<(String, String)>,
    form: Vec<(String, String)>,
    cookies: Vec<(String, String)>,
    /// The `Host` header.
    pub(crate) host: Option<String>,
    /// The `Origin` header, which a browser sends with a form it posts.
    pub(crate) origin: Option<String>,
}

impl Request {
    /// The query parameter `name`, when given and not empty.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        lookup(&self.query, name).filter(|v| !v.is_empty())
    }

    /// The form field `name`.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        lookup(&self.form, name)
    }

    /// The cookie `name`.
    pub(crate) fn cookie(&self, name: &str) -> Option<&str> {
        lookup(&self.cookies, name)
    }
}

fn lookup<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// `request` read whole, or the answer that refuses it: a body over 64 KiB, or a posted body
/// that is not a form.
pub(crate) async fn read(request: hyper::Request<Incoming>) -> Result<Request, Answer> {
    let (parts, body) = request.into_parts();
    let text = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut read = Request {
        method: parts.method.clone(),
        path: parts.uri.path().to_owned(),
        query: parts
            .uri
            .query()
            .map(|q| pairs(q.as_bytes()))
            .unwrap_or_default(),
        host: text(header::HOST),
        origin: text(header::ORIGIN),
        ..Request::default()
    };
    for cookies in parts.headers.get_all(header::COOKIE) {
        let Ok(cookies) = cookies.to_str() else {
            continue;
        };
        for cookie in cookies.split(';') {
            if let Some((name, value)) = cookie.trim().split_once('=') {
                read.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    if parts.method == Method::POST {
        let is_form = text(header::CONTENT_TYPE).is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/x-www-form-urlencoded")
        });
        if !is_form {
            return Err(Answer::plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the console takes forms (application/x-www-form-urlencoded) only",
            ));
        }
        let body = Limited::new(body, MAX_FORM_BYTES)
            .collect()
            .await
            .map_err(|_| {
                Answer::plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the form is over 64 KiB, or its connection failed",
                )
            })?;
        read.form = pairs(&body.to_bytes());
    }
    Ok(read)
}

fn pairs(encoded: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(encoded)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Answer {
    status: StatusCode,
    content_type: &'static str,
    body: String,
    location: Option<String>,
    cookies: Vec<String>,
}

impl Answer {
    /// A page.
    pub(crate) fn page(status: StatusCode, html: String) -> Answer {
        Answer {
            status,
            content_type: "text/html; charset=utf-8",
            body: html,
            location: None,
            cookies: Vec::new(),
        }
    }

    /// Plain text (for what is not a browser's page: a refused body).
    pub(crate) fn plain(status: StatusCode, text: &str) -> Answer {
        Answer {
            content_type: "text/plain; charset=utf-8",
            ..Answer::page(status, format!("{text}\n"))
        }
    }

    /// The console's style sheet.
    pub(crate) fn css(css: &'static str) -> Answer {
        Answer {
            content_type: "text/css; charset=utf-8",
            ..Answer::page(StatusCode::OK, css.to_owned())
        }
    }

    /// "See `location`" (303): where a browser goes after a form, or to sign in. `location` is
    /// a path of the console's own.
    pub(crate) fn see(location: impl Into<String>) -> Answer {
        Answer {
            location: Some(location.into()),
            ..Answer::page(StatusCode::SEE_OTHER, String::new())
        }
    }

    /// With the `Set-Cookie` header `cookie`.
    pub(crate) fn with_cookie(mut self, cookie: String) -> Answer {
        self.cookies.push(cookie);
        self
    }

    /// As hyper sends it.
    pub(crate) fn into_response(self) -> hyper::Response<Full<Bytes>> {
        let mut response = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        for (name, value) in SECURITY_HEADERS {
            headers.insert(name, HeaderValue::from_static(value));
        }
        if let Some(location) = self.location.and_then(|l| HeaderValue::try_from(l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        for cookie in self.cookies {
            if let Ok(cookie) = HeaderValue::try_from(cookie) {
                headers.append(header::SET_COOKIE, cookie);
            }
        }
        response
    }
}
