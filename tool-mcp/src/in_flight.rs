//! The calls the server has started and not finished, counted so that the server waits for
//! them before it stops.
//!
//! A call runs on the task the SDK gives its request. The SDK never aborts that task: a client
//! that cancels, or goes away, only has the answer dropped, so a write is never cut in half
//! (`tests/mcp/mcp_cancel.rs` holds it to this). The count ends when the call's future does: when it
//! completes, or when the runtime drops it at shutdown.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;
use tokio::sync::Notify;

/// Counts the calls running.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight {
    count: Arc<Count>,
}

/// The count, and who waits for it to reach zero.
#[derive(Debug, Default)]
struct Count {
    running: AtomicUsize,
    /// Told each time the count falls to zero.
    idle: Notify,
}

/// One call counted until it is dropped, when its future ends (or is dropped unfinished).
struct Counted {
    count: Arc<Count>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.count.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.count.idle.notify_waiters();
        }
    }
}

impl InFlight {
    /// Runs `call`, counted from now until it ends; a panic out of it is caught and answered
    /// as its payload, so that the request still gets an answer.
    ///
    /// The future returned holds `call` once, in place: it is built from combinators, not an
    /// async block (which would hold `call` as its capture and again where it pins it).
    pub(crate) fn run<F: Future>(
        &self,
        call: F,
    ) -> impl Future<Output = Result<F::Output, Box<dyn Any + Send>>> + use<F> {
        self.count.running.fetch_add(1, Ordering::AcqRel);
        let counted = Counted {
            count: self.count.clone(),
        };
        AssertUnwindSafe(call).catch_unwind().map(move |ended| {
            drop(counted);
            ended
        })
    }

    /// How many calls are running.
    pub(crate) fn running(&self) -> usize {
        self.count.running.load(Ordering::Acquire)
    }

    /// Waits until no call is running.
    pub(crate) async fn idle(&self) {
        loop {
            // Registered before the count is read, so that a fall to zero in between wakes it.
            let fell = self.count.idle.notified();
            let mut fell = std::pin::pin!(fell);
            fell.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            fell.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn a_call_is_counted_until_it_ends() {
        let in_flight = InFlight::default();
        let (release, released) = oneshot::channel::<()>();
        let call = tokio::spawn(in_flight.run(async move {
            released.await.unwrap();
            "ran to its end"
        }));
        assert_eq!(in_flight.running(), 1);
        release.send(()).unwrap();
        in_flight.idle().await;
        assert_eq!(call.await.unwrap().unwrap(), "ran to its end");
        assert_eq!(in_flight.running(), 0);
    }

    #[tokio::test]
    async fn a_call_dropped_unfinished_is_no_longer_counted() {
        let in_flight = InFlight::default();
        let call = in_flight.run(std::future::pending::<()>());
        assert_eq!(in_flight.running(), 1);
        drop(call);
        assert_eq!(in_flight.running(), 0);
        in_flight.idle().await;
    }

    #[tokio::test]
    async fn a_panic_is_caught_and_the_call_no_longer_counted() {
        let in_flight = InFlight::default();
        let payload = in_flight
            .run(async {
                panic!("out of the dispatcher");
                #[allow(unreachable_code)]
                ()
            })
            .await
            .unwrap_err();
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"out of the dispatcher")
        );
        assert_eq!(in_flight.running(), 0);
    }

    #[test]
    fn the_counted_future_holds_the_call_once() {
        let in_flight = InFlight::default();
        let state = [0u8; 2048];
        let call = async move {
            std::future::ready(()).await;
            state.len()
        };
        let call_size = std::mem::size_of_val(&call);
        let counted = in_flight.run(call);
        // The count's handle and the panic guard's state, not a second copy of the call.
        assert!(
            std::mem::size_of_val(&counted) <= call_size + 32,
            "{} bytes for a call of {call_size}",
            std::mem::size_of_val(&counted)
        );
    }

    #[tokio::test]
    async fn idle_returns_at_once_with_nothing_running() {
        let in_flight = InFlight::default();
        in_flight.idle().await;
        assert_eq!(in_flight.run(async { 42 }).await.unwrap(), 42);
        in_flight.idle().await;
        assert_eq!(in_flight.running(), 0);
    }
}
