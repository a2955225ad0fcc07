//! [`Route`]: which requests a planned fault, or a count, is about.

use std::fmt;

use http::Method;

/// The requests of one method (or of any) whose path starts with a prefix, segment by segment:
/// `/refunds` takes `/refunds`, `/refunds/` and `/refunds/re_1`, never `/refundsx`; `/` takes
/// every path. The query is not part of the path.
///
/// For a [`FaultHook`](super::FaultHook), the method and path are the names the tool gives its
/// provider's operations (`POST /emails` for an e-mail sent, say).
///
/// ```
/// use http::Method;
/// use toolgate_test::chaos::Route;
///
/// let refunds = Route::post("/refunds");
/// assert!(refunds.matches(&Method::POST, "/refunds"));
/// assert!(refunds.matches(&Method::POST, "/refunds/re_1/cancel"));
/// assert!(!refunds.matches(&Method::GET, "/refunds"));
/// assert!(!refunds.matches(&Method::POST, "/refundsx"));
/// assert!(Route::any("/").matches(&Method::DELETE, "/orders/1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    method: Option<Method>,
    prefix: String,
}

impl Route {
    /// The requests of `method` under `prefix`.
    pub fn new(method: Method, prefix: impl Into<String>) -> Self {
        Route {
            method: Some(method),
            prefix: prefix.into(),
        }
    }

    /// The requests of any method under `prefix`.
    pub fn any(prefix: impl Into<String>) -> Self {
        Route {
            method: None,
            prefix: prefix.into(),
        }
    }

    /// The `GET` requests under `prefix`.
    pub fn get(prefix: impl Into<String>) -> Self {
        Route::new(Method::GET, prefix)
    }

    /// The `POST` requests under `prefix`.
    pub fn post(prefix: impl Into<String>) -> Self {
        Route::new(Method::POST, prefix)
    }

    /// The `PUT` requests under `prefix`.
    pub fn put(prefix: impl Into<String>) -> Self {
        Route::new(Method::PUT, prefix)
    }

    /// The `PATCH` requests under `prefix`.
    pub fn patch(prefix: impl Into<String>) -> Self {
        Route::new(Method::PATCH, prefix)
    }

    /// The `DELETE` requests under `prefix`.
    pub fn delete(prefix: impl Into<String>) -> Self {
        Route::new(Method::DELETE, prefix)
    }

    /// The method, or `None` for any.
    pub fn method(&self) -> Option<&Method> {
        self.method.as_ref()
    }

    /// The path prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether a request of `method` to `path` is one of this route's.
    pub fn matches(&self, method: &Method, path: &str) -> bool {
        if self.method.as_ref().is_some_and(|own| own != method) {
            return false;
        }
        let Some(rest) = path.strip_prefix(self.prefix.as_str()) else {
            return false;
        };
        rest.is_empty() || rest.starts_with('/') || self.prefix.ends_with('/')
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(method) => write!(f, "{method} {}", self.prefix),
            None => write!(f, "any {}", self.prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_takes_its_method_and_the_paths_under_its_prefix() {
        let cases = [
            (Route::post("/refunds"), Method::POST, "/refunds", true),
            (Route::post("/refunds"), Method::POST, "/refunds/", true),
            (Route::post("/refunds"), Method::POST, "/refunds/re_1", true),
            (Route::post("/refunds"), Method::POST, "/refundsx", false),
            (Route::post("/refunds"), Method::POST, "/refund", false),
            (Route::post("/refunds"), Method::POST, "/", false),
            (Route::post("/refunds"), Method::GET, "/refunds", false),
            (
                Route::post("/refunds/"),
                Method::POST,
                "/refunds/re_1",
                true,
            ),
            (Route::post("/refunds/"), Method::POST, "/refunds", false),
            (Route::any("/refunds"), Method::GET, "/refunds/re_1", true),
            (Route::any("/refunds"), Method::DELETE, "/refunds", true),
            (Route::any("/"), Method::PUT, "/", true),
            (Route::any("/"), Method::PUT, "/orders/1", true),
            (Route::any(""), Method::GET, "/orders", true),
            (Route::get("/orders/1"), Method::GET, "/orders/10", false),
            (Route::put("/a"), Method::PUT, "/a/b", true),
            (Route::patch("/a"), Method::PATCH, "/a", true),
            (Route::delete("/a"), Method::DELETE, "/a", true),
        ];
        for (route, method, path, matches) in cases {
            assert_eq!(
                route.matches(&method, path),
                matches,
                "{route} with {method} {path}"
            );
        }
    }

    #[test]
    fn a_route_reads_as_its_method_and_prefix() {
        assert_eq!(Route::post("/refunds").to_string(), "POST /refunds");
        assert_eq!(Route::any("/").to_string(), "any /");
    }
}
