//! [`FaultPlan`]: which requests misbehave and how, and the record of every request seen. The
//! proxy and the hook share it: both count, fault and record requests here.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use http::Method;
use tokio::sync::watch;

use super::{Fault, Record, Route, Upstream};

/// The faults planned for requests, chosen by route and by count, and the record of every
/// request seen, in order. Clones share one plan: a test keeps one and hands another to the
/// [`FaultProxy`](super::FaultProxy) or [`FaultHook`](super::FaultHook) that plays it.
///
/// Requests are counted per route from the plan's start: the 2nd `POST /refunds` is the 2nd
/// request the plan sees that [`Route::matches`], whatever came between. A request takes the
/// fault planned for its number on its route; when several planned faults claim it (routes
/// that overlap), it takes the one planned first, and the others are not played later.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use toolgate_test::chaos::{Fault, FaultPlan, Route};
///
/// let plan = FaultPlan::new();
/// // The 2nd and 3rd POST to /refunds apply, and their answers are lost.
/// plan.at(Route::post("/refunds"), [2, 3], Fault::DropAfterApply);
/// // The next 3 requests of any method to /orders are refused with a 503.
/// plan.next(Route::any("/orders"), 3, Fault::Unavailable);
/// // Then the one after is rate limited.
/// plan.next(Route::any("/orders"), 1, Fault::RateLimited { retry_after: Duration::from_secs(2) });
/// assert!(plan.requests().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct FaultPlan {
    state: Arc<watch::Sender<State>>,
}

#[derive(Default)]
struct State {
    /// In the order they were planned; a rule is dropped once its last request has passed.
    rules: Vec<Rule>,
    records: Vec<Record>,
}

/// One fault planned for some requests of a route.
struct Rule {
    route: Route,
    /// How many requests of the route the plan has seen.
    seen: u64,
    /// The numbers of the requests of the route that take the fault and have not come yet.
    numbers: Numbers,
    fault: Fault,
}

impl FaultPlan {
    /// A plan with no fault: every request is left alone, and recorded.
    pub fn new() -> Self {
        FaultPlan::default()
    }

    /// The requests of `route` numbered `numbers` (1 for the first the plan sees, counted from
    /// its start) take `fault`. A number may be planned before or after earlier ones have come.
    ///
    /// # Panics
    ///
    /// If a number is 0, or a request of that number has already been seen: that request was
    /// never going to take the fault, and the test that planned it is wrong.
    pub fn at(&self, route: Route, numbers: impl IntoIterator<Item = u64>, fault: Fault) -> &Self {
        let numbers: BTreeSet<u64> = numbers.into_iter().collect();
        let first = numbers.first().copied();
        assert!(
            first != Some(0),
            "requests of a route are numbered from 1, not 0"
        );
        // Checked and planned under one lock; the panic waits until the lock is let go.
        let mut too_late = None;
        self.state.send_modify(|state| {
            let seen = state.seen(&route);
            match first {
                Some(first) if first <= seen => too_late = Some((first, seen)),
                _ => state.plan(route.clone(), seen, Numbers::Listed(numbers), fault),
            }
        });
        if let Some((first, seen)) = too_late {
            panic!(
                "request {first} of {route} has already been seen ({seen} so far): plan its \
                 fault before it comes"
            );
        }
        self
    }

    /// The next `times` requests of `route` take `fault`: the ones after every request of
    /// `route` seen so far and after those already planned a fault on the same route, so that
    /// faults planned one after the other are played one after the other.
    pub fn next(&self, route: Route, times: u64, fault: Fault) -> &Self {
        self.state.send_modify(|state| {
            let seen = state.seen(&route);
            let planned = state
                .rules
                .iter()
                .filter(|rule| rule.route == route)
                .filter_map(|rule| rule.numbers.last())
                .max()
                .unwrap_or(0);
            let first = seen.max(planned) + 1;
            // A span, however many: `times` may be a count no set of numbers could hold.
            let numbers = match times {
                0 => Numbers::Listed(BTreeSet::new()),
                _ => Numbers::Span(first, first.saturating_add(times - 1)),
            };
            state.plan(route, seen, numbers, fault);
        });
        self
    }

    /// Forgets every fault not played yet; the record stays.
    pub fn clear(&self) {
        self.state.send_modify(|state| state.rules.clear());
    }

    /// Every request seen so far, in the order it came.
    pub fn requests(&self) -> Vec<Record> {
        self.state.borrow().records.clone()
    }

    /// How many requests of `route` were seen.
    pub fn count(&self, route: &Route) -> usize {
        self.state
            .borrow()
            .records
            .iter()
            .filter(|record| record.is_of(route))
            .count()
    }

    /// The idempotency keys the requests of `route` carried, in order, repeats included; a
    /// request with no key adds none (compare with [`FaultPlan::count`]).
    pub fn keys(&self, route: &Route) -> Vec<String> {
        self.state
            .borrow()
            .records
            .iter()
            .filter(|record| record.is_of(route))
            .filter_map(|record| record.key.clone())
            .collect()
    }

    /// Waits until `done` holds of the requests seen, checked now and at every change of the
    /// record (a request seen, an answer from the provider). A test waits here for what the
    /// proxy does on its own tasks, for example that the provider answered a request whose
    /// answer the client never got, instead of sleeping.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    pub async fn wait_for(&self, mut done: impl FnMut(&[Record]) -> bool) {
        let mut changes = self.state.subscribe();
        // The sender lives as long as `self`: the wait ends only when `done` holds.
        let _ = changes.wait_for(|state| done(&state.records)).await;
    }

    /// Records a request of `method` to `path` carrying `key`, and answers its place in the
    /// record and the fault it takes.
    pub(crate) fn arrive(
        &self,
        method: Method,
        path: String,
        key: Option<String>,
    ) -> (usize, Option<Fault>) {
        let mut arrival = (0, None);
        self.state.send_modify(|state| {
            let mut fault = None;
            for rule in &mut state.rules {
                if !rule.route.matches(&method, &path) {
                    continue;
                }
                rule.seen += 1;
                // A number of a rule that another took first is spent too.
                if rule.numbers.take(rule.seen) && fault.is_none() {
                    fault = Some(rule.fault);
                }
            }
            state.rules.retain(|rule| !rule.numbers.is_empty());
            arrival = (state.records.len(), fault);
            state.records.push(Record {
                method,
                path,
                key,
                fault,
                upstream: Upstream::NotSent,
            });
        });
        arrival
    }

    /// Notes how far the request at `index` of the record got.
    pub(crate) fn reach(&self, index: usize, upstream: Upstream) {
        self.state.send_modify(|state| {
            if let Some(record) = state.records.get_mut(index) {
                record.upstream = upstream;
            }
        });
    }
}

/// The numbers of a rule's requests still to come.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Numbers {
    /// Each number, as [`FaultPlan::at`] planned them.
    Listed(BTreeSet<u64>),
    /// From the first to the last, both in, as [`FaultPlan::next`] planned them; empty once the
    /// first is past the last.
    Span(u64, u64),
}

impl Numbers {
    /// Whether request `seen` of the route is one of them; every number up to it is spent.
    fn take(&mut self, seen: u64) -> bool {
        match self {
            Numbers::Listed(numbers) => {
                let planned = numbers.remove(&seen);
                numbers.retain(|&number| number > seen);
                planned
            }
            Numbers::Span(first, last) => {
                let planned = (*first..=*last).contains(&seen);
                *first = (*first).max(seen.saturating_add(1));
                if seen == u64::MAX {
                    *last = 0;
                }
                planned
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Numbers::Listed(numbers) => numbers.is_empty(),
            Numbers::Span(first, last) => first > last,
        }
    }

    fn last(&self) -> Option<u64> {
        match self {
            Numbers::Listed(numbers) => numbers.last().copied(),
            Numbers::Span(_, last) if !self.is_empty() => Some(*last),
            Numbers::Span(..) => None,
        }
    }
}

/// Marks a request [`Upstream::Abandoned`] if it is dropped before [`Waiting::sent`]: the
/// guard of a request waiting out a [`Fault::Delay`].
#[derive(Debug)]
pub(crate) struct Waiting {
    plan: FaultPlan,
    index: usize,
    sent: bool,
}

impl Waiting {
    /// The request goes on to the provider.
    pub(crate) fn sent(mut self) {
        self.sent = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.sent {
            self.plan.reach(self.index, Upstream::Abandoned);
        }
    }
}

impl FaultPlan {
    /// A guard for the request at `index` while it waits: dropped before it is sent, the
    /// request is marked abandoned.
    pub(crate) fn waiting(&self, index: usize) -> Waiting {
        Waiting {
            plan: self.clone(),
            index,
            sent: false,
        }
    }
}

impl State {
    /// How many requests of `route` were seen.
    fn seen(&self, route: &Route) -> u64 {
        let seen = self.records.iter().filter(|record| record.is_of(route));
        u64::try_from(seen.count()).unwrap_or(u64::MAX)
    }

    fn plan(&mut self, route: Route, seen: u64, numbers: Numbers, fault: Fault) {
        if !numbers.is_empty() {
            self.rules.push(Rule {
                route,
                seen,
                numbers,
                fault,
            });
        }
    }
}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.borrow();
        let planned: Vec<_> = state
            .rules
            .iter()
            .map(|rule| (rule.route.to_string(), &rule.numbers, rule.fault))
            .collect();
        f.debug_struct("FaultPlan")
            .field("planned", &planned)
            .field("requests", &state.records)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_for_billions_of_requests_is_planned_without_a_number_each() {
        let plan = FaultPlan::new();
        let refunds = Route::post("/refunds");
        plan.next(refunds.clone(), 4_000_000_000, Fault::Unavailable);
        plan.next(refunds.clone(), u64::MAX, Fault::DropAfterApply);
        for _ in 0..3 {
            assert_eq!(
                arrive(&plan, Method::POST, "/refunds"),
                Some(Fault::Unavailable)
            );
        }
        let state = plan.state.borrow();
        assert_eq!(state.rules[0].numbers, Numbers::Span(4, 4_000_000_000));
        assert_eq!(
            state.rules[1].numbers,
            Numbers::Span(4_000_000_001, u64::MAX),
            "the second comes after the first, and its count stops at the last number"
        );
    }

    fn arrive(plan: &FaultPlan, method: Method, path: &str) -> Option<Fault> {
        plan.arrive(method, path.to_owned(), None).1
    }

    /// Which of the POSTs to /refunds, in a stream of requests to other routes too, take the
    /// fault planned with `at`.
    #[test]
    fn a_fault_at_a_number_takes_that_request_of_its_route_only() {
        let plan = FaultPlan::new();
        plan.at(Route::post("/refunds"), [2, 3], Fault::Unavailable);
        let taken: Vec<_> = [
            (Method::POST, "/refunds"),
            (Method::GET, "/refunds"),
            (Method::POST, "/orders"),
            (Method::POST, "/refunds"),
            (Method::POST, "/refunds/re_1"),
            (Method::POST, "/refunds"),
        ]
        .into_iter()
        .map(|(method, path)| arrive(&plan, method, path))
        .collect();
        let unavailable = Some(Fault::Unavailable);
        assert_eq!(
            taken,
            [None, None, None, unavailable, unavailable, None],
            "{plan:?}"
        );
        assert!(plan.state.borrow().rules.is_empty(), "a played rule goes");
    }

    #[test]
    fn next_counts_from_what_was_seen_and_what_was_planned_on_the_route() {
        let plan = FaultPlan::new();
        let refunds = Route::post("/refunds");
        assert_eq!(arrive(&plan, Method::POST, "/refunds"), None);
        plan.next(refunds.clone(), 2, Fault::Unavailable);
        plan.next(refunds.clone(), 1, Fault::ResetAfterApply);
        plan.next(refunds.clone(), 0, Fault::DropAfterApply);
        let taken: Vec<_> = (0..4)
            .map(|_| arrive(&plan, Method::POST, "/refunds"))
            .collect();
        assert_eq!(
            taken,
            [
                Some(Fault::Unavailable),
                Some(Fault::Unavailable),
                Some(Fault::ResetAfterApply),
                None
            ]
        );
    }

    #[test]
    fn overlapping_routes_give_a_request_the_fault_planned_first() {
        let plan = FaultPlan::new();
        plan.next(Route::any("/"), 1, Fault::Unavailable);
        plan.next(Route::post("/refunds"), 2, Fault::ResetAfterApply);
        assert_eq!(
            arrive(&plan, Method::POST, "/refunds"),
            Some(Fault::Unavailable)
        );
        assert_eq!(
            arrive(&plan, Method::POST, "/refunds"),
            Some(Fault::ResetAfterApply),
            "the first request's number on /refunds was spent by the other plan"
        );
        assert_eq!(arrive(&plan, Method::POST, "/refunds"), None);
    }

    #[test]
    fn clear_forgets_the_faults_not_played_and_keeps_the_record() {
        let plan = FaultPlan::new();
        plan.next(Route::any("/"), 5, Fault::Unavailable);
        assert_eq!(arrive(&plan, Method::GET, "/a"), Some(Fault::Unavailable));
        plan.clear();
        assert_eq!(arrive(&plan, Method::GET, "/a"), None);
        assert_eq!(plan.count(&Route::any("/")), 2);
    }

    #[test]
    fn the_record_keeps_keys_faults_and_how_far_each_request_got() {
        let plan = FaultPlan::new();
        plan.at(Route::post("/refunds"), [2], Fault::DropAfterApply);
        let (first, _) = plan.arrive(Method::POST, "/refunds".into(), Some("k1".into()));
        let (second, fault) = plan.arrive(Method::POST, "/refunds".into(), Some("k1".into()));
        plan.arrive(Method::POST, "/refunds".into(), None);
        plan.arrive(Method::GET, "/orders/1".into(), Some("k9".into()));
        assert_eq!((first, second, fault), (0, 1, Some(Fault::DropAfterApply)));
        plan.reach(first, Upstream::Answered(http::StatusCode::OK));
        plan.reach(second, Upstream::Sent);
        let refunds = Route::post("/refunds");
        assert_eq!(plan.count(&refunds), 3);
        assert_eq!(plan.keys(&refunds), ["k1", "k1"]);
        let records = plan.requests();
        assert_eq!(records.len(), 4);
        assert_eq!(
            records[0].upstream,
            Upstream::Answered(http::StatusCode::OK)
        );
        assert_eq!(records[1].fault, Some(Fault::DropAfterApply));
        assert_eq!(records[1].upstream, Upstream::Sent);
        assert_eq!(records[2].upstream, Upstream::NotSent);
        assert_eq!(records[3].key.as_deref(), Some("k9"));
    }

    #[test]
    #[should_panic(expected = "request 1 of POST /refunds has already been seen (1 so far)")]
    fn a_number_already_seen_cannot_be_planned() {
        let plan = FaultPlan::new();
        arrive(&plan, Method::POST, "/refunds");
        plan.at(Route::post("/refunds"), [1, 2], Fault::Unavailable);
    }

    #[test]
    #[should_panic(expected = "numbered from 1")]
    fn requests_are_numbered_from_one() {
        FaultPlan::new().at(Route::any("/"), [0], Fault::Unavailable);
    }

    #[tokio::test]
    async fn wait_for_returns_once_the_record_holds() {
        let plan = FaultPlan::new();
        let waiting = tokio::spawn({
            let plan = plan.clone();
            async move {
                plan.wait_for(|records| {
                    records.first().map(|record| record.upstream) == Some(Upstream::Sent)
                })
                .await;
            }
        });
        let (index, _) = plan.arrive(Method::GET, "/a".into(), None);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a request not sent yet");
        plan.reach(index, Upstream::Sent);
        waiting.await.unwrap();
    }
}
