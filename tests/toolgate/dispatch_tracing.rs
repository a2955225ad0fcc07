//! The trace span of a call: `execute_tool`, with the call's fields, entered while the tool runs
//! (so what the tool records lands in it) and closed with the call's status and, when it failed,
//! what failed; a panic's message is an error event inside it, and never part of the result.
//! Every call id the dispatcher answers has one, the calls answered without running included.
//!
//! Tracing caches process-wide whether a callsite is enabled, and the other tests of this binary
//! run without a subscriber on threads of their own. So the subscriber is global, installed once
//! ([`Router`]), and every callsite asks it each time; it hands what it sees to the [`Recorder`]
//! of the thread it runs on, which only these tests install (their runtimes run on one thread).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

use toolgate::prelude::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// Look up an order.
#[tool(permission = "orders:read", timeout = "1s")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    tracing::info!(order_id, "looking up the order");
    Ok(format!("{order_id}: paid"))
}

/// Look up a customer; it panics.
#[tool(timeout = "1s")]
async fn get_customer(customer_id: String) -> Result<String, ToolError> {
    panic!("no customer {customer_id}: internal detail 3c9d");
}

/// What the subscriber saw, one line per thing, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Writes each field as `name=value`.
struct Fields<'a>(&'a mut Vec<String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

/// A subscriber that wants every span and event and notes them, with the spans entered at the
/// time of each event.
struct Recorder {
    seen: Seen,
    next_id: AtomicU64,
    entered: Mutex<Vec<u64>>,
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        self.seen.push(format!(
            "new {} #{id} {}",
            span.metadata().name(),
            fields.join(" ")
        ));
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Vec::new();
        values.record(&mut Fields(&mut fields));
        self.seen
            .push(format!("record #{} {}", span.into_u64(), fields.join(" ")));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let entered = self.entered.lock().unwrap().clone();
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.seen
            .push(format!("event in {entered:?} {}", fields.join(" ")));
    }

    fn enter(&self, span: &Id) {
        self.entered.lock().unwrap().push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
            entered.remove(at);
        }
    }
}

thread_local! {
    /// The recorder of the test running on this thread, if it records.
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// The process's subscriber: passes each span and event to the [`Recorder`] of its thread, and
/// disables them on a thread without one.
struct Router;

impl Router {
    fn with<T>(&self, default: T, f: impl FnOnce(&Recorder) -> T) -> T {
        RECORDER.with(|recorder| match &*recorder.borrow() {
            Some(recorder) => f(recorder),
            None => default,
        })
    }
}

impl Subscriber for Router {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.with(false, |recorder| recorder.enabled(metadata))
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        // Never called where `enabled` said no; an id that is never shown otherwise.
        self.with(Id::from_u64(u64::MAX), |recorder| recorder.new_span(span))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.with((), |recorder| recorder.record(span, values));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        self.with((), |recorder| recorder.event(event));
    }

    fn enter(&self, span: &Id) {
        self.with((), |recorder| recorder.enter(span));
    }

    fn exit(&self, span: &Id) {
        self.with((), |recorder| recorder.exit(span));
    }
}

/// Takes the thread's recorder away when dropped.
struct Recording;

impl Drop for Recording {
    fn drop(&mut self) {
        RECORDER.with(|recorder| recorder.borrow_mut().take());
    }
}

/// A [`Recorder`] for the current thread until the guard is dropped, and what it saw.
fn recording() -> (Seen, Recording) {
    static ROUTER: Once = Once::new();
    ROUTER.call_once(|| {
        tracing::subscriber::set_global_default(Router).expect("no other global subscriber");
    });
    let seen = Seen::default();
    let recorder = Recorder {
        seen: seen.clone(),
        next_id: AtomicU64::new(0),
        entered: Mutex::new(Vec::new()),
    };
    RECORDER.with(|slot| *slot.borrow_mut() = Some(recorder));
    (seen, Recording)
}

#[tokio::test]
async fn a_call_runs_inside_its_span_and_the_span_gets_its_status() {
    let (seen, _default) = recording();
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let session = Session::new(
        crate::support::agent().with_permissions(["orders:read"]),
        "run-1",
    );

    let call = ToolCall::new(
        "call_1",
        "get_order",
        serde_json::json!({"order_id": "ORD-1"}),
    );
    let report = dispatcher.dispatch(&session, call).await.unwrap();

    assert_eq!(
        report.result.to_json_string(),
        r#"{"status":"succeeded","replayed":false,"data":"ORD-1: paid"}"#
    );
    assert_eq!(
        seen.lines(),
        [
            "new execute_tool #1 otel.name=execute_tool get_order \
             gen_ai.operation.name=execute_tool gen_ai.tool.name=get_order \
             gen_ai.tool.description=Look up an order. gen_ai.tool.call.id=call_1 gen_ai.tool.type=function \
             gen_ai.conversation.id=run-1 toolgate.run.id=run-1",
            "event in [1] message=looking up the order order_id=ORD-1",
            "record #1 toolgate.status=succeeded",
            "record #1 toolgate.attempts=1",
        ]
    );
}

#[tokio::test]
async fn a_panic_is_an_error_event_in_the_span_of_its_call_only() {
    let (seen, _default) = recording();
    let mut registry = Registry::new();
    registry.register::<get_customer>().unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let session = crate::support::session();

    let call = ToolCall::new(
        "call_1",
        "get_customer",
        serde_json::json!({"customer_id": "C-1"}),
    );
    let report = dispatcher.dispatch(&session, call).await.unwrap();

    let result = report.result.to_json_string();
    assert!(result.contains(r#""kind":"internal""#), "{result}");
    assert!(!result.contains("internal detail"), "{result}");
    assert_eq!(
        seen.lines(),
        [
            "new execute_tool #1 otel.name=execute_tool get_customer \
             gen_ai.operation.name=execute_tool gen_ai.tool.name=get_customer \
             gen_ai.tool.description=Look up a customer; it panics. gen_ai.tool.call.id=call_1 gen_ai.tool.type=function \
             gen_ai.conversation.id=run-1 toolgate.run.id=run-1",
            "event in [1] message=the tool panicked tool=get_customer \
             panic=no customer C-1: internal detail 3c9d",
            "record #1 toolgate.status=error",
            "record #1 toolgate.attempts=1",
            "record #1 error.type=internal",
            "record #1 otel.status_code=ERROR",
            "record #1 otel.status_description=get_customer failed unexpectedly",
        ]
    );
}

/// A call of `get_order` for ORD-1, or of `tool` with no arguments.
fn call(id: &str, tool: &str) -> ToolCall {
    let arguments = match tool {
        "get_order" => serde_json::json!({"order_id": "ORD-1"}),
        _ => serde_json::json!({}),
    };
    ToolCall::new(id, tool, arguments)
}

#[tokio::test]
async fn every_call_answered_has_a_span_saying_what_failed() {
    let (seen, _default) = recording();
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry).build();

    // A turn: an unknown tool, refused in the pipeline; an id given to two calls, answered
    // without running.
    let reader = Session::new(
        crate::support::agent().with_permissions(["orders:read"]),
        "run-1",
    );
    let turn = vec![
        call("c1", "get_order"),
        call("c2", "nope"),
        call("c1", "get_order"),
    ];
    let reports = dispatcher.dispatch_turn(&reader, turn).await.unwrap();
    assert_eq!(reports.len(), 2);
    // A call without its permission aborts the run; a later one does not start.
    let stranger = crate::support::session_in("run-2");
    let aborted = dispatcher
        .dispatch(&stranger, call("c3", "get_order"))
        .await
        .unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::PermissionDenied);
    dispatcher
        .dispatch(&stranger, call("c4", "nope"))
        .await
        .unwrap_err();

    let lines = seen.lines();
    let spans: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|line| !line.starts_with("event"))
        .collect();
    let aborted = "(permission_denied): the session may not call get_order: user `agent` of \
                   tenant `acme` lacks the permission `orders:read`";
    assert_eq!(
        spans,
        [
            // In the pipeline: refused there.
            "new execute_tool #1 otel.name=execute_tool nope gen_ai.operation.name=execute_tool \
             gen_ai.tool.name=nope gen_ai.tool.call.id=c2 gen_ai.tool.type=function \
             gen_ai.conversation.id=run-1 toolgate.run.id=run-1",
            "record #1 toolgate.status=error",
            "record #1 toolgate.attempts=0",
            "record #1 error.type=unknown_tool",
            "record #1 otel.status_code=ERROR",
            r#"record #1 otel.status_description=there is no tool named "nope""#,
            // Answered when the turn ends, without running.
            "new execute_tool #2 otel.name=execute_tool get_order \
             gen_ai.operation.name=execute_tool gen_ai.tool.name=get_order \
             gen_ai.tool.description=Look up an order. gen_ai.tool.call.id=c1 \
             gen_ai.tool.type=function gen_ai.conversation.id=run-1 toolgate.run.id=run-1",
            "record #2 toolgate.status=error",
            "record #2 toolgate.attempts=0",
            "record #2 error.type=invalid_arguments",
            "record #2 otel.status_code=ERROR",
            r#"record #2 otel.status_description=the call id "c1" was given to 2 calls in this turn"#,
            "new execute_tool #3 otel.name=execute_tool get_order \
             gen_ai.operation.name=execute_tool gen_ai.tool.name=get_order \
             gen_ai.tool.description=Look up an order. gen_ai.tool.call.id=c3 \
             gen_ai.tool.type=function gen_ai.conversation.id=run-2 toolgate.run.id=run-2",
            "record #3 toolgate.status=run_aborted",
            "record #3 toolgate.attempts=0",
            "record #3 error.type=run_aborted",
            "record #3 otel.status_code=ERROR",
            &format!("record #3 otel.status_description=the call aborted the run {aborted}"),
            "new execute_tool #4 otel.name=execute_tool nope gen_ai.operation.name=execute_tool \
             gen_ai.tool.name=nope gen_ai.tool.call.id=c4 gen_ai.tool.type=function \
             gen_ai.conversation.id=run-2 toolgate.run.id=run-2",
            "record #4 toolgate.status=not_started",
            "record #4 toolgate.attempts=0",
            "record #4 error.type=run_aborted",
            "record #4 otel.status_code=ERROR",
            &format!(
                "record #4 otel.status_description=the call did not start: the run is aborted \
                 {aborted}"
            ),
        ]
    );
}
