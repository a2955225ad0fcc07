//! Runs the refund desk, the MCP server and the fake payment provider as processes, as a user
//! would: the rig of the tests that play scripts on the refund desk and drive the MCP server.
//!
//! The processes are this package's binaries (`src/bin/`), which cargo builds before it builds
//! this test: each is reached with `env!("CARGO_BIN_EXE_…")`, so a test never runs a stale one.
//! The functions panic when something fails, as a test should.

use std::io::{BufRead, BufReader, Read, Write};

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

/// How long a test waits for a process to say something before failing.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// The operator's command line (`toolgate` of `toolgate-cli`, as this package's `operator`
/// binary), ready to take flags.
pub(crate) fn operator_cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_operator"))
}

/// A token of acme's operator `subject` holding `permission`, issued with the command line
/// (`operators issue`) by acme's issuer `acme-ops`, which the first call makes in `store` with
/// `operators init`, its secret key in `dir`.
pub(crate) fn operator_token(store: &str, dir: &Path, subject: &str, permission: &str) -> String {
    let secret = dir.join("acme-ops.jwk");
    if !secret.exists() {
        let made = operator_cli()
            .args([
                "--store",
                store,
                "operators",
                "init",
                "--issuer",
                "acme-ops",
            ])
            .args(["--tenant", "acme", "--secret-file"])
            .arg(&secret)
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
    }
    let issued = operator_cli()
        .args(["operators", "issue", "--secret-file"])
        .arg(&secret)
        .args(["--subject", subject, "--permission", permission])
        .output()
        .unwrap();
    assert!(issued.status.success(), "{issued:?}");
    String::from_utf8(issued.stdout)
        .unwrap()
        .trim_end()
        .to_owned()
}

/// The refund desk binary, ready to take flags.
pub(crate) fn desk() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_refund_desk"));
    command.env("NO_COLOR", "1");
    command
}

/// The MCP server binary, ready to take flags.
pub(crate) fn mcp_server() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcp_server"))
}

/// The `mcp_server` example serving streamable HTTP on a free loopback port, as a process of its
/// own; killed when dropped.
pub(crate) struct McpHttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT`, where it serves MCP.
    pub(crate) url: String,
    /// What it says on stderr after the address, read so that it never blocks on a full pipe.
    lines: Receiver<String>,
}

impl McpHttpServer {
    /// Starts `mcp_server --http 127.0.0.1:0` with `args` (its `--token`s, `--db`, …) and waits
    /// until it says where it listens.
    pub(crate) fn start(args: &[&str]) -> Self {
        let mut child = mcp_server()
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcp_server starts");
        let lines = read_lines(child.stderr.take().expect("stderr is piped"));
        let url = loop {
            let line = lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|err| panic!("mcp_server never said where it listens: {err}"));
            if let Some(rest) = line.strip_prefix("mcp_server: listening on ") {
                break rest.split(';').next().unwrap_or(rest).to_owned();
            }
        };
        McpHttpServer { child, url, lines }
    }

    /// The next line it says on stderr that holds `needle`, waiting up to [`PATIENCE`] for it.
    pub(crate) fn said(&self, needle: &str) -> String {
        loop {
            let line = self.lines.recv_timeout(PATIENCE).unwrap_or_else(|err| {
                panic!("mcp_server never said anything holding {needle:?}: {err}")
            });
            if line.contains(needle) {
                return line;
            }
        }
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of a desk's stdout, each parsed as JSON.
pub(crate) fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: not JSON: {line}"))
        })
        .collect()
}

/// Plays `script` on a desk with `args`; panics unless it exits 0. Answers stdout, each line
/// parsed.
pub(crate) fn play(script: &str, args: &[&str]) -> Vec<Value> {
    let output = play_output(script, args);
    assert!(
        output.status.success(),
        "the desk failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    json_lines(&output.stdout)
}

/// Plays `script` (given on stdin) on a desk with `args`; answers the whole output.
pub(crate) fn play_output(script: &str, args: &[&str]) -> Output {
    play_bytes(script.as_bytes(), args)
}

/// [`play_output`] with a script of any bytes, UTF-8 or not.
pub(crate) fn play_bytes(script: &[u8], args: &[&str]) -> Output {
    let mut child = desk()
        .args(["--script", "-"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the desk starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(script)
        .expect("the desk reads its script");
    child.wait_with_output().expect("the desk runs")
}

/// The contents of a result's `content` (OpenAI) string, parsed: the result object.
pub(crate) fn openai_results(answer: &Value) -> Vec<Value> {
    answer["openai"]
        .as_array()
        .unwrap_or_else(|| panic!("not an openai answer: {answer}"))
        .iter()
        .map(|message| {
            let content = message["content"].as_str().expect("content is a string");
            serde_json::from_str(content).expect("content is a result object")
        })
        .collect()
}

/// The one result of a one-call OpenAI answer.
pub(crate) fn only_result(answer: &Value) -> Value {
    let mut results = openai_results(answer);
    assert_eq!(results.len(), 1, "{answer}");
    results.remove(0)
}

/// One OpenAI turn line calling `tool` with `arguments` (a JSON object) as call `id`.
pub(crate) fn call(id: &str, tool: &str, arguments: Value) -> String {
    let turn = serde_json::json!({"openai": {
        "role": "assistant",
        "content": null,
        "tool_calls": [{"id": id, "type": "function", "function": {
            "name": tool,
            "arguments": arguments.to_string(),
        }}],
    }});
    turn.to_string()
}

/// A fake payment provider running as its own process; killed when dropped.
pub(crate) struct FakePayments {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    lines: Receiver<String>,
}

impl FakePayments {
    /// Starts `fake_payments` on a free port and waits until it listens.
    pub(crate) fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fake_payments"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("fake_payments starts");
        let lines = read_lines(child.stdout.take().expect("stdout is piped"));
        let first = lines
            .recv_timeout(PATIENCE)
            .expect("fake_payments says where it listens");
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("not an address: {first}"))
            .to_owned();
        FakePayments { child, url, lines }
    }

    /// Waits for the provider to print a line starting with `prefix` (such as `applied
    /// re_000003`), skipping the others; answers it.
    pub(crate) fn wait_for(&self, prefix: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|err| panic!("fake_payments never printed {prefix:?}: {err}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }
}

impl Drop for FakePayments {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every line `output` (a child's stdout or stderr) prints, as it prints it.
pub(crate) fn read_lines(output: impl Read + Send + 'static) -> Receiver<String> {
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}
