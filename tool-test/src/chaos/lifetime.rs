//! The proxy's lifetime: every task it spawns (its accept loop, a connection, an exchange with
//! the provider) ends when it stops, and stopping can wait until they all have.

use std::future::Future;

use tokio::sync::{mpsc, watch};

/// Spawns tasks that end when their [`Stop`] is dropped or stopped. Clones share the lifetime;
/// every clone, and every task, holds a token that [`Stop::stop`] waits for.
#[derive(Debug, Clone)]
pub(crate) struct Lifetime {
    stopped: watch::Receiver<()>,
    _alive: mpsc::Sender<()>,
}

/// Ends a [`Lifetime`]'s tasks: on [`Stop::stop`], or when dropped.
#[derive(Debug)]
pub(crate) struct Stop {
    stop: watch::Sender<()>,
    ended: mpsc::Receiver<()>,
}

/// A lifetime and what stops it.
pub(crate) fn lifetime() -> (Stop, Lifetime) {
    let (stop, stopped) = watch::channel(());
    let (alive, ended) = mpsc::channel(1);
    (
        Stop { stop, ended },
        Lifetime {
            stopped,
            _alive: alive,
        },
    )
}

impl Lifetime {
    /// Runs `task` on its own task until it ends or the lifetime does, whichever comes first.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut lifetime = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = lifetime.stopped() => {}
                () = task => {}
            }
            drop(lifetime);
        });
    }

    /// Returns once the lifetime has ended.
    async fn stopped(&mut self) {
        // Nothing is ever sent: the channel only closes.
        while self.stopped.changed().await.is_ok() {}
    }
}

impl Stop {
    /// Ends every task of the lifetime, and returns once each has ended and dropped what it
    /// held (its sockets).
    pub(crate) async fn stop(self) {
        let Stop { stop, mut ended } = self;
        drop(stop);
        // `None` once every token is gone.
        while ended.recv().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stopping_ends_every_task_and_waits_for_them() {
        let (stop, lifetime) = lifetime();
        let (dropped, mut gone) = mpsc::channel::<()>(1);
        for _ in 0..3 {
            let dropped = dropped.clone();
            lifetime.spawn(async move {
                let _held = dropped;
                std::future::pending::<()>().await;
            });
        }
        drop((dropped, lifetime));
        tokio::task::yield_now().await;
        assert!(gone.try_recv().is_err(), "the tasks still run");
        stop.stop().await;
        assert_eq!(
            gone.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }

    #[tokio::test]
    async fn a_task_that_ends_first_is_not_waited_for() {
        let (stop, lifetime) = lifetime();
        let (done, finished) = tokio::sync::oneshot::channel();
        lifetime.spawn(async move {
            let _ = done.send(());
        });
        finished.await.unwrap();
        drop(lifetime);
        stop.stop().await;
    }
}
