//! One HTTP/1.1 request written by hand, for the tests of what the server answers before the
//! protocol: its status, headers and (for an answer with a length) body.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The value of the header `name` (any case), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|err| panic!("{err}: {self:?}"))
    }
}

/// Sends `method` to `/mcp` at `addr` with `headers` and `body`; reads the head of the answer
/// and, when it says its length, its body (an event stream is left unread).
pub async fn request(
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut stream = send(addr, method, headers, body).await;
    let mut read = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "the server closed before its answer's head: {read:?}"
        );
        read.extend_from_slice(&chunk[..n]);
        if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8(read[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut body = read[head_end + 4..].to_vec();
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .map(|(_, value)| value.parse::<usize>().unwrap());
    if let Some(length) = length {
        while body.len() < length {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed before the answer's body ended");
            body.extend_from_slice(&chunk[..n]);
        }
    }
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Sends a `POST` to `/mcp` at `addr` and reads its answer, head and all, as text, until the
/// server closes the connection or the text holds `until`.
pub async fn post_reading_until(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &str,
    until: &str,
) -> String {
    let mut stream = send(addr, "POST", headers, body).await;
    let mut answer = String::new();
    let mut buffer = [0u8; 4096];
    while !answer.contains(until) {
        let read = stream.read(&mut buffer).await.unwrap();
        if read == 0 {
            break;
        }
        answer.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    answer
}

/// A connection to `addr` on which the request has been written.
async fn send(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut text = format!(
        "{method} /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).await.unwrap();
    stream
}
