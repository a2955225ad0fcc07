//! A failpoint hook that records the steps a write reached, and acts at one of them.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use toolgate_core::dispatch::{Failpoint, Failpoints};

/// What runs when a write reaches the chosen point.
type Action = Arc<dyn Fn(Failpoint) + Send + Sync>;

/// A [`Failpoints`] hook for the dispatcher (`DispatcherBuilder::failpoints`) that records every
/// step a write reaches, in order, and can act when one is reached: panic there, or run what
/// the test gives (block, kill the process, take a store down).
///
/// ```
/// use std::panic::{AssertUnwindSafe, catch_unwind};
///
/// use toolgate_core::{dispatch::{Failpoint, Failpoints}};
/// use toolgate_test::RecordingFailpoints;
///
/// let failpoints = RecordingFailpoints::new().panic_at(Failpoint::Executed);
/// failpoints.hit(Failpoint::Claimed);
/// let crashed = catch_unwind(AssertUnwindSafe(|| failpoints.hit(Failpoint::Executed)));
/// assert!(crashed.is_err());
/// assert_eq!(failpoints.hits(), [Failpoint::Claimed, Failpoint::Executed]);
/// ```
#[derive(Default)]
pub struct RecordingFailpoints {
    hits: Mutex<Vec<Failpoint>>,
    action: Option<(Failpoint, Action)>,
}

impl RecordingFailpoints {
    /// A hook that only records.
    pub fn new() -> Self {
        RecordingFailpoints::default()
    }

    /// Runs `action` each time a write reaches `point`, after the hit is recorded. The action
    /// runs inside the dispatcher, on the task of the call: it may block, panic or end the
    /// process to play a crash at that step. Replaces an action set before.
    pub fn at(
        mut self,
        point: Failpoint,
        action: impl Fn(Failpoint) + Send + Sync + 'static,
    ) -> Self {
        self.action = Some((point, Arc::new(action)));
        self
    }

    /// Panics each time a write reaches `point`: the call's task ends there, as if the process
    /// had died, leaving the store as that step left it.
    pub fn panic_at(self, point: Failpoint) -> Self {
        self.at(point, |point| {
            panic!("the test stopped the write at the failpoint {point:?}")
        })
    }

    /// Every step reached so far, in order.
    pub fn hits(&self) -> Vec<Failpoint> {
        self.recorded().clone()
    }

    /// How many times a write reached `point`.
    pub fn count(&self, point: Failpoint) -> usize {
        self.recorded().iter().filter(|&&hit| hit == point).count()
    }

    fn recorded(&self) -> MutexGuard<'_, Vec<Failpoint>> {
        self.hits
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Failpoints for RecordingFailpoints {
    fn hit(&self, point: Failpoint) {
        self.recorded().push(point);
        if let Some((at, action)) = &self.action
            && *at == point
        {
            action(point);
        }
    }
}

impl fmt::Debug for RecordingFailpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingFailpoints")
            .field("hits", &*self.recorded())
            .field("acts_at", &self.action.as_ref().map(|(point, _)| point))
            .finish()
    }
}
