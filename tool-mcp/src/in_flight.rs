//! The calls the server has started and not finished, counted so that the server waits for
//! them before it stops.
//!
//! A call runs on the task the SDK gives its request. The SDK never aborts that task: a client
//! that cancels, or goes away, only has the answer dropped, so a write is never cut in half
//! (`tests/mcp_cancel.rs` holds it to this). The count ends when the call's future does: when it
//! completes, or when the runtime drops it at shutdown.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::watch;

/// Counts the calls running.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    count: Arc<watch::Sender<usize>>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            count: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// One call counted until it is dropped, when its future ends (or is dropped unfinished).
struct Counted {
    count: Arc<watch::Sender<usize>>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.count.send_modify(|count| *count -= 1);
    }
}

impl InFlight {
    /// Runs `call`, counted from now until it ends; a panic out of it is caught and answered
    /// as its payload, so that the request still gets an answer.
    pub(crate) fn run<F: Future>(
        &self,
        call: F,
    ) -> impl Future<Output = Result<F::Output, Box<dyn Any + Send>>> + use<F> {
        self.count.send_modify(|count| *count += 1);
        let counted = Counted {
            count: self.count.clone(),
        };
        async move {
            let _counted = counted;
            let mut call = std::pin::pin!(call);
            std::future::poll_fn(|cx| {
                match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
                    Ok(poll) => poll.map(Ok),
                    Err(payload) => Poll::Ready(Err(payload)),
                }
            })
            .await
        }
    }

    /// How many calls are running.
    pub(crate) fn running(&self) -> usize {
        *self.count.borrow()
    }

    /// Waits until no call is running.
    pub(crate) async fn idle(&self) {
        let mut count = self.count.subscribe();
        // The sender lives as long as `self`: the wait ends only at zero.
        let _ = count.wait_for(|count| *count == 0).await;
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

    #[tokio::test]
    async fn idle_returns_at_once_with_nothing_running() {
        let in_flight = InFlight::default();
        in_flight.idle().await;
        assert_eq!(in_flight.run(async { 42 }).await.unwrap(), 42);
        in_flight.idle().await;
        assert_eq!(in_flight.running(), 0);
    }
}
