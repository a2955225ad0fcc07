//! The console as its tests meet it: the `toolgate console` process on a store, and a client that
//! speaks HTTP to it with a cookie jar, as a browser would without the browser.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use toolgate_core::identity::IssuerSecret;
use toolgate_core::store::OperationStore;

use crate::support::now_ms;

/// A `toolgate console` process, killed when dropped.
pub(crate) struct ConsoleProcess {
    child: Child,
    /// `127.0.0.1:PORT`, as its first line said.
    pub(crate) addr: String,
}

impl ConsoleProcess {
    /// `toolgate console --store STORE --listen 127.0.0.1:0`, once it said where it listens.
    pub(crate) fn start(store: &str) -> ConsoleProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["console", "--store", store, "--listen", "127.0.0.1:0"])
            .env_remove("TOOLGATE_STORE")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the toolgate binary starts");
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .trim()
            .strip_prefix("toolgate console on http://")
            .and_then(|rest| rest.strip_suffix('/'))
            .unwrap_or_else(|| panic!("the console's first line names its address: {first:?}"))
            .to_owned();
        ConsoleProcess { child, addr }
    }

    /// Interrupts it (Ctrl-C) and waits for it: its exit status and what it printed after its
    /// address.
    pub(crate) fn interrupt(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(killed.success());
        let mut rest = String::new();
        let mut stdout = BufReader::new(self.child.stdout.take().unwrap());
        while stdout.read_line(&mut rest).unwrap() > 0 {}
        (self.child.wait().unwrap(), rest)
    }
}

impl Drop for ConsoleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer, read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) cookies: Vec<String>,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

/// A client of one console with a cookie jar.
pub(crate) struct Client {
    addr: String,
    jar: Vec<(String, String)>,
}

impl Client {
    /// A client of the console at `addr`, with no cookie.
    pub(crate) fn new(addr: &str) -> Client {
        Client {
            addr: addr.to_owned(),
            jar: Vec::new(),
        }
    }

    /// `GET path`.
    pub(crate) async fn get(&mut self, path: &str) -> Reply {
        self.send("GET", path, None, &[]).await
    }

    /// `POST path` with the form `fields`.
    pub(crate) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let form: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.send("POST", path, Some(form), &[]).await
    }

    /// A request with the extra headers `headers`; the jar's cookies go with it, and the
    /// answer's are kept (a `Max-Age=0` one is dropped).
    pub(crate) async fn send(
        &mut self,
        method: &str,
        path: &str,
        form: Option<String>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let stream = TcpStream::connect(&self.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut request = http::Request::builder().method(method).uri(path);
        if !headers.iter().any(|(name, _)| *name == "host") {
            request = request.header("host", &self.addr);
        }
        if !self.jar.is_empty() {
            let cookies: Vec<String> = self.jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("cookie", cookies.join("; "));
        }
        if form.is_some() {
            request = request.header("content-type", "application/x-www-form-urlencoded");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = Full::new(Bytes::from(form.unwrap_or_default()));
        let response = sender
            .send_request(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        let location = text("location");
        let cookies: Vec<String> = headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        for cookie in &cookies {
            let pair = cookie.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.jar.retain(|(k, _)| k != name);
            if !cookie.contains("Max-Age=0") {
                self.jar.push((name.to_owned(), value.to_owned()));
            }
        }
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            location,
            cookies,
            headers,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    /// Signs in with `token` through the sign-in page: the answer to the posted form.
    pub(crate) async fn sign_in(&mut self, token: &str) -> Reply {
        let page = self.get("/login").await;
        assert_eq!(page.status, 200, "{page:?}");
        let csrf = csrf_of(&page.body);
        self.post("/login", &[("csrf", &csrf), ("token", token)])
            .await
    }
}

/// The CSRF token of the first form of `page`.
pub(crate) fn csrf_of(page: &str) -> String {
    let at = page
        .find(r#"name="csrf" value=""#)
        .unwrap_or_else(|| panic!("a form carries a CSRF token: {page}"));
    let rest = &page[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// An issuer of tenant `tenant` whose public key `store` holds.
pub(crate) async fn issuer(store: &dyn OperationStore, name: &str, tenant: &str) -> IssuerSecret {
    let secret = IssuerSecret::generate(name, tenant).unwrap();
    assert!(
        store
            .add_issuer_key(&secret.public(), now_ms())
            .await
            .unwrap()
    );
    secret
}

/// A token of `secret` for `subject` holding `permissions`, valid for an hour.
pub(crate) fn token(secret: &IssuerSecret, subject: &str, permissions: &[&str]) -> String {
    secret
        .issue(subject, permissions, Duration::from_secs(3600), now_ms())
        .unwrap()
}
