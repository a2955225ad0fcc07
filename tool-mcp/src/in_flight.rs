//! The calls the server has started and not finished: each runs on a task of its own, so that a
//! client that cancels, or goes away, never cuts a write in half, and the server waits for them
//! before it stops.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Counts the calls running on their own tasks.
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

/// One call counted until it is dropped, when its task ends (or is dropped unpolled).
struct Counted {
    count: Arc<watch::Sender<usize>>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.count.send_modify(|count| *count -= 1);
    }
}

impl InFlight {
    /// Runs `call` on a task of its own, in the current span, counted until it ends. Dropping
    /// the handle stops waiting for it, never the call.
    pub(crate) fn spawn<F>(&self, call: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.count.send_modify(|count| *count += 1);
        let counted = Counted {
            count: self.count.clone(),
        };
        tokio::spawn(
            async move {
                let _counted = counted;
                call.await
            }
            .in_current_span(),
        )
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
    async fn a_call_runs_to_its_end_when_its_handle_is_dropped() {
        let in_flight = InFlight::default();
        let (release, released) = oneshot::channel::<()>();
        let (finished, finish) = oneshot::channel();
        let handle = in_flight.spawn(async move {
            released.await.unwrap();
            finished.send("ran to its end").unwrap();
        });
        assert_eq!(in_flight.running(), 1);
        drop(handle);
        release.send(()).unwrap();
        in_flight.idle().await;
        assert_eq!(finish.await.unwrap(), "ran to its end");
        assert_eq!(in_flight.running(), 0);
    }

    #[tokio::test]
    async fn idle_returns_at_once_with_nothing_running() {
        let in_flight = InFlight::default();
        in_flight.idle().await;
        let answer = in_flight.spawn(async { 42 }).await.unwrap();
        assert_eq!(answer, 42);
        in_flight.idle().await;
        assert_eq!(in_flight.running(), 0);
    }
}
