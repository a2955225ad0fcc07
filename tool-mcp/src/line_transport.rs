//! The server's transport on a byte stream (stdio, a socket, an in-memory pipe): one JSON-RPC
//! message a line, as MCP's stdio transport frames them. Each line is read once, and a
//! `tools/call`'s arguments keep the text the client sent ([`RawArguments`]), which the SDK's
//! own reader turns into a tree first.

use std::future::Future;
use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, GetExtensions, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::raw_arguments::RawArguments;

/// The longest line read, as the SDK's stdio transport reads (16 MiB); a longer one is
/// dropped, and the connection stays open.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The room a message to send is written into at first: an answer to a call fits.
const SEND_CAPACITY: usize = 1024;

/// A byte stream's two halves as an SDK transport of the server.
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far: kept across a `receive` the service drops half way (it polls
    /// `receive` in a `select!`), so no byte is lost.
    line: Vec<u8>,
    /// Dropping the rest of a line longer than [`MAX_LINE`].
    discarding: bool,
    write: Arc<Mutex<Option<W>>>,
}

/// How one read of a line ended.
enum LineRead {
    Line,
    Oversized,
    End,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }

    /// Reads up to the end of the next line into `self.line`, never holding more than
    /// [`MAX_LINE`] bytes of it.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let (taken, ended) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(err) => {
                        tracing::error!(error = %err, "the MCP client's stream failed");
                        return LineRead::End;
                    }
                };
                if available.is_empty() {
                    return LineRead::End;
                }
                let newline = available.iter().position(|byte| *byte == b'\n');
                let taken = newline.map_or(available.len(), |at| at + 1);
                if !self.discarding {
                    if self.line.len() + taken > MAX_LINE {
                        self.line.clear();
                        self.discarding = true;
                    } else {
                        self.line.extend_from_slice(&available[..taken]);
                    }
                }
                (taken, newline.is_some())
            };
            self.read.consume(taken);
            if ended {
                if self.discarding {
                    self.discarding = false;
                    tracing::error!(
                        max_bytes = MAX_LINE,
                        "an MCP message longer than the longest line read was dropped"
                    );
                    return LineRead::Oversized;
                }
                return LineRead::Line;
            }
        }
    }
}

/// The id of a message the SDK's types cannot read, to answer it.
#[derive(Deserialize)]
struct Unread<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let write = self.write.clone();
        // Sized for the answer to a call, so that writing it does not grow the buffer step by
        // step.
        let mut text = Vec::with_capacity(SEND_CAPACITY);
        let text = serde_json::to_writer(&mut text, &item).map(|()| {
            text.push(b'\n');
            text
        });
        async move {
            let text = text.map_err(io::Error::other)?;
            let mut write = write.lock().await;
            let Some(write) = write.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            write.write_all(&text).await?;
            write.flush().await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                LineRead::Line => {}
                LineRead::Oversized => continue,
                LineRead::End => return None,
            }
            let text = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                self.line.clear();
                continue;
            }
            let read = serde_json::from_slice::<ClientJsonRpcMessage>(text).map(|mut message| {
                if let ClientJsonRpcMessage::Request(request) = &mut message
                    && let ClientRequest::CallToolRequest(_) = &request.request
                    && let Some(raw) = RawArguments::of_call(text)
                {
                    request.request.extensions_mut().insert(raw);
                }
                message
            });
            let answer = match read {
                Ok(message) => {
                    self.line.clear();
                    return Some(message);
                }
                // Not JSON: there is no id to answer, and answering text that may be an echo
                // of an answer could go on forever. The SDKs ignore it; so does this server.
                Err(err) if err.is_syntax() || err.is_eof() => {
                    tracing::debug!(error = %err, "an MCP line that is not JSON was ignored");
                    None
                }
                Err(err) => invalid_request(text, &err),
            };
            self.line.clear();
            if let Some(answer) = answer
                && self.send(answer).await.is_err()
            {
                return None;
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

/// The answer to JSON that is not a message the server reads: `-32600`, with the request's id
/// when it has one; none for a notification (no id), which is never answered.
fn invalid_request(text: &[u8], err: &serde_json::Error) -> Option<ServerJsonRpcMessage> {
    let unread: Unread<'_> = serde_json::from_slice(text).ok()?;
    let id = match unread.id {
        Some(id) => Some(serde_json::from_str(id.get()).ok()?),
        None if text.windows(8).any(|window| window == b"\"method\"") => return None,
        None => None,
    };
    let error = ErrorData::invalid_request(
        format!("Invalid Request: not a JSON-RPC 2.0 message this server reads: {err}"),
        None,
    );
    Some(ServerJsonRpcMessage::error(error, id))
}
