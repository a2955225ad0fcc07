//! A headless Chromium driven through ChromeDriver's W3C WebDriver protocol, for the console's
//! browser test: Debian's `chromium` and `chromium-driver`, installed by the test itself when the
//! machine lacks them (as the PostgreSQL tests start their server), and the few WebDriver
//! commands the test needs (open a page, find, type, click, read, run a script, screenshot).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::debian;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The key W3C WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Installs Debian's `chromium` and `chromium-driver` when either is missing; panics with what
/// to do when that fails. Never skips.
pub(crate) fn ensure_chromium() {
    let present = || Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if let Err(why) = debian::ensure(&["chromium", "chromium-driver"], present) {
        panic!(
            "the console's browser test needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): {why}\ninstall them (`apt-get install -y chromium chromium-driver`, as root), then run the tests again"
        );
    }
}

/// A ChromeDriver process with one headless Chromium session; both end when it is dropped.
pub(crate) struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
    /// Where screenshots go.
    shots: PathBuf,
}

impl Browser {
    /// ChromeDriver on a free loopback port, once it says it started, and a new headless
    /// Chromium session with an empty profile; screenshots go to `shots`.
    pub(crate) async fn start(shots: &Path) -> Browser {
        ensure_chromium();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("chromedriver starts");
        let mut out = BufReader::new(driver.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let read = out.read_line(&mut line).unwrap();
            assert!(read > 0, "chromedriver ended before it started");
            if line.contains("started successfully") {
                break;
            }
        }
        // Keep reading what it prints, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in out.lines() {});
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--window-size=1400,900".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            // Finding an element waits up to 10 s for it to appear: how a click's next page is
            // awaited (see `submit`).
            "timeouts": {"implicit": 10_000},
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let addr = format!("127.0.0.1:{port}");
        let created = request(&addr, "POST", "/session", Some(capabilities)).await;
        let session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a WebDriver session: {created}"))
            .to_owned();
        std::fs::create_dir_all(shots).unwrap();
        Browser {
            driver,
            addr,
            session,
            _profile: profile,
            shots: shots.to_owned(),
        }
    }

    /// A command of the session: its value; panics on a WebDriver error.
    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let value = self.command_or_error(method, path, body).await;
        if let Some(error) = value.get("error") {
            panic!("WebDriver {method} {path}: {error}: {}", value["message"]);
        }
        value
    }

    /// A command of the session: its value, or the WebDriver error it answered.
    async fn command_or_error(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        request(&self.addr, method, &path, body).await
    }

    /// Opens `url` and waits for it to load.
    pub(crate) async fn open(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})))
            .await;
    }

    /// The current page's URL.
    pub(crate) async fn url(&self) -> String {
        self.command("GET", "/url", None)
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The element `css` selects; panics when none does.
    pub(crate) async fn find(&self, css: &str) -> String {
        let found = self
            .command(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("an element {css}: {found}"))
            .to_owned()
    }

    /// Types `text` into the element `css` selects.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        let path = format!("/element/{element}/value");
        self.command("POST", &path, Some(json!({"text": text})))
            .await;
    }

    /// Clicks the element `css` selects, a button that submits a form, and waits for the page
    /// the form leads to: the page is marked before the click, and the next one is found when
    /// an unmarked page is (ChromeDriver's implicit wait does the waiting).
    pub(crate) async fn submit(&self, css: &str) {
        let element = self.find(css).await;
        self.run("document.documentElement.dataset.left = 'yes';")
            .await;
        let path = format!("/element/{element}/click");
        self.command("POST", &path, Some(json!({}))).await;
        self.find("html:not([data-left])").await;
    }

    /// The rendered text of the element `css` selects, as a reader sees it.
    pub(crate) async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        let path = format!("/element/{element}/text");
        let text = self.command("GET", &path, None).await;
        text.as_str().unwrap().to_owned()
    }

    /// Runs `script` in the page (WebDriver's, not the page's: the page itself runs none).
    pub(crate) async fn run(&self, script: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Whether a JavaScript dialog (an `alert`) is open.
    pub(crate) async fn alert_open(&self) -> bool {
        let text = self.command_or_error("GET", "/alert/text", None).await;
        !text.get("error").is_some_and(|e| e == "no such alert")
    }

    /// A PNG of the window, written to `NAME.png` among the screenshots: its path.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let shot = self.command("GET", "/screenshot", None).await;
        let png = B64.decode(shot.as_str().unwrap()).unwrap();
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // ChromeDriver ends its Chromium with the session; killing it alone would leave the
        // browser running.
        let (addr, path) = (self.addr.clone(), format!("/session/{}", self.session));
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(runtime) = runtime {
                runtime.block_on(request(&addr, "DELETE", &path, None));
            }
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// One WebDriver command: its `value` (a WebDriver error's `value` holds `error`).
async fn request(addr: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let mut answer: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "WebDriver answers JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    answer["value"].take()
}
