//! Tests that run in several OS processes: the test binary starts itself again, running one
//! test of its own (the child), and the two talk in lines over the child's stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A child process running the test `test` of the current test binary, alone, with its output
/// captured line by line. The child test reads its parameters from environment variables set
/// here, and returns at once when they are absent (so a plain run of the suite passes it).
///
/// ```no_run
/// use toolgate_test_postgres::ChildTest;
///
/// let mut child = ChildTest::spawn("child_worker", &[("MY_TEST_CHILD_URL", "postgres://…")]);
/// child.expect("child: ready");
/// child.send("go");
/// child.finish("child: done");
/// ```
pub struct ChildTest {
    process: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl std::fmt::Debug for ChildTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildTest")
            .field("pid", &self.process.id())
            .finish_non_exhaustive()
    }
}

impl ChildTest {
    /// Starts the current test binary with `--exact test --nocapture --test-threads=1` (`test` as
    /// libtest names it: `module::name` in a binary of modules) and the
    /// environment variables `env`; its stderr goes to the parent's.
    pub fn spawn(test: &str, env: &[(&str, &str)]) -> ChildTest {
        let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
        command
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = command.spawn().expect("spawn a child test process");
        let stdin = process.stdin.take();
        let stdout = BufReader::new(process.stdout.take().expect("the child's stdout"));
        ChildTest {
            process,
            stdin,
            stdout,
        }
    }

    /// Reads the child's output up to the line holding `marker` (libtest may print the test's
    /// name before it on the same line); answers the line from the marker on, `None` when the
    /// child's output ended first.
    pub fn read_until(&mut self, marker: &str) -> Option<String> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).expect("read a child") == 0 {
                return None;
            }
            if let Some(at) = line.find(marker) {
                return Some(line[at..].trim_end().to_owned());
            }
        }
    }

    /// [`ChildTest::read_until`], failing the test when the child ended before printing
    /// `marker`.
    pub fn expect(&mut self, marker: &str) -> String {
        match self.read_until(marker) {
            Some(line) => line,
            None => panic!(
                "a child ended before it printed {marker:?}: {:?}",
                self.process.wait()
            ),
        }
    }

    /// Writes `line` to the child's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the child's stdin");
        writeln!(stdin, "{line}").expect("write to a child");
    }

    /// Kills the child with SIGKILL and reaps it.
    pub fn kill(mut self) {
        self.process.kill().expect("kill a child");
        self.process.wait().expect("reap a child");
    }

    /// Reads up to `marker` (the line is answered), then waits for the child to exit and fails
    /// the test unless it exited successfully.
    pub fn finish(mut self, marker: &str) -> String {
        let line = self.read_until(marker);
        drop(self.stdin.take());
        let status = self.process.wait().expect("wait for a child");
        assert!(status.success(), "a child failed: {status}");
        line.unwrap_or_else(|| panic!("a child exited without printing {marker:?}"))
    }
}
