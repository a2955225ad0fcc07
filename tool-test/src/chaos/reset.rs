//! A client's connection that the proxy can reset: a TCP `RST` in place of an answer.
//!
//! A reset is `SO_LINGER` set to zero (tokio's [`TcpStream::set_zero_linger`]) when the socket
//! is closed: the kernel then sends `RST` instead of the `FIN` of an orderly close, and the
//! client's read fails with "connection reset by peer". Setting it on every connection would
//! also throw away answers still in the send buffer, so it is set only on the connection tripped,
//! as it is dropped.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client's socket that is reset when it closes, once its [`ResetSwitch`] has been tripped.
#[derive(Debug)]
pub(crate) struct ResettableStream {
    stream: TcpStream,
    reset: ResetSwitch,
}

/// Trips the reset of one [`ResettableStream`].
#[derive(Debug, Clone, Default)]
pub(crate) struct ResetSwitch(Arc<AtomicBool>);

impl ResetSwitch {
    /// The connection is reset when it closes, and never shut down in order before.
    pub(crate) fn trip(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn tripped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl ResettableStream {
    /// `stream`, and the switch that resets it.
    pub(crate) fn new(stream: TcpStream) -> (Self, ResetSwitch) {
        let reset = ResetSwitch::default();
        let stream = ResettableStream {
            stream,
            reset: reset.clone(),
        };
        (stream, reset)
    }
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.tripped() {
            // If the option cannot be set, the socket closes in order: the client then reads an
            // end of stream where it expected an answer, which is a lost answer too.
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.reset.tripped() {
            // A `FIN` now would reach the client before the `RST`: it would read an orderly end.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}
