//! The spans of MCP requests as OpenTelemetry exports them (feature `otel`): a `tools/call` whose
//! `_meta` carries the client's `traceparent` continues the client's trace (the server span's
//! parent is the client's span), the dispatcher's `execute_tool` span is the server span's
//! child, and the spans of calls that failed or were refused say what failed.

// A process of its own: see `tests/mcp/main.rs`.
#[path = "mcp/common/mod.rs"]
mod common;

use common::{Shop, call, connect, protocol_error, server, session};
use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rmcp::model::RequestParamsMeta;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use toolgate::AuthContext;
use toolgate::mcp::{Peer, RUN_ABORTED, Refused, StdioSession};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::SubscriberExt;

/// The client's trace and span, as its `traceparent` names them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Spans exported in memory by an OpenTelemetry pipeline that is this thread's tracing
/// subscriber until the guard is dropped. The server, the client and the calls run on the test's
/// one thread (`#[tokio::test]` is current-thread), so every span reaches it.
struct Exported {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _default: DefaultGuard,
}

impl Exported {
    fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("mcp_trace"));
        let default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        Exported {
            exporter,
            _provider: provider,
            _default: default,
        }
    }

    /// The spans named `name` that have ended, in the order they ended.
    fn named(&self, name: &str) -> Vec<SpanData> {
        let spans = self.exporter.get_finished_spans().unwrap();
        spans.into_iter().filter(|span| span.name == name).collect()
    }

    /// The one span named `name` that has ended.
    fn one(&self, name: &str) -> SpanData {
        let mut spans = self.named(name);
        assert_eq!(spans.len(), 1, "spans named {name}");
        spans.pop().unwrap()
    }
}

/// The value of `span`'s attribute `key`, as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|attribute| attribute.value.to_string())
}

/// The description of `span`'s status, which must be `ERROR`.
fn error_description(span: &SpanData) -> String {
    match &span.status {
        Status::Error { description } => description.to_string(),
        other => panic!("{} ended {other:?}, not in error", span.name),
    }
}

#[tokio::test]
async fn a_call_continues_the_clients_trace_and_its_tool_runs_in_the_server_span() {
    let exported = Exported::install();
    let shop = Shop::open();
    let hook = StdioSession::from_session(session("acme", &["orders:read"]));
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();

    let mut request = call("get_order", json!({"order_id": "ORD-1"}));
    request.set_traceparent(&format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"));
    request.set_tracestate("congo=t61rcWkgMzE");
    let result = client.call_tool(request).await.unwrap();
    assert_eq!(result.is_error, Some(false));

    let served = exported.one("tools/call get_order");
    assert_eq!(served.span_kind, SpanKind::Server);
    assert_eq!(served.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(served.parent_span_id.to_string(), CLIENT_SPAN);
    assert!(served.parent_span_is_remote);
    assert_eq!(
        served.span_context.trace_state().get("congo"),
        Some("t61rcWkgMzE")
    );
    assert_eq!(served.status, Status::Unset);
    let attributes: Vec<(&str, Option<String>)> = [
        "mcp.method.name",
        "gen_ai.tool.name",
        "gen_ai.operation.name",
        "jsonrpc.request.id",
        "mcp.protocol.version",
        "network.transport",
        "error.type",
        "traceparent",
    ]
    .into_iter()
    .map(|key| (key, attribute(&served, key)))
    .collect();
    let request_id = attribute(&served, "jsonrpc.request.id").unwrap();
    assert!(request_id.parse::<u64>().is_ok(), "{request_id}");
    let version = client.peer_info().unwrap().protocol_version.to_string();
    assert_eq!(
        attributes,
        [
            ("mcp.method.name", Some("tools/call".into())),
            ("gen_ai.tool.name", Some("get_order".into())),
            ("gen_ai.operation.name", Some("execute_tool".into())),
            ("jsonrpc.request.id", Some(request_id)),
            ("mcp.protocol.version", Some(version)),
            // An in-memory stream: no network transport to name.
            ("network.transport", None),
            ("error.type", None),
            // The parent, not a field.
            ("traceparent", None),
        ]
    );

    let ran = exported.one("execute_tool get_order");
    assert_eq!(ran.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(ran.parent_span_id, served.span_context.span_id());
    assert_eq!(ran.status, Status::Unset);
    assert_eq!(
        attribute(&ran, "gen_ai.tool.description").as_deref(),
        Some("Look up an order.")
    );

    // The span the request arrived in (the SDK's, of the connection) is linked.
    assert_eq!(served.links.links.len(), 1);
    let arrived_in = served.links.links[0].span_context.clone();
    assert!(arrived_in.is_valid());
    assert_ne!(arrived_in.trace_id().to_string(), TRACE_ID);

    // Without a traceparent, or with one that is not W3C trace context, the server span is the
    // child of the span the request arrived in; a bad traceparent is kept as a field.
    client
        .call_tool(call("get_order", json!({"order_id": "ORD-2"})))
        .await
        .unwrap();
    let mut request = call("get_order", json!({"order_id": "ORD-3"}));
    request.set_traceparent("00-not-a-trace-01");
    client.call_tool(request).await.unwrap();
    let served = exported.named("tools/call get_order");
    assert_eq!(served.len(), 3);
    for served in &served[1..] {
        assert_eq!(served.span_context.trace_id(), arrived_in.trace_id());
        assert_eq!(served.parent_span_id, arrived_in.span_id());
        assert!(!served.parent_span_is_remote);
        assert!(served.links.links.is_empty());
    }
    assert_eq!(attribute(&served[1], "traceparent"), None);
    assert_eq!(
        attribute(&served[2], "traceparent").as_deref(),
        Some("00-not-a-trace-01")
    );

    client.list_all_tools().await.unwrap();
    let listed = exported.one("tools/list");
    assert_eq!(listed.span_kind, SpanKind::Server);
    assert_eq!(
        attribute(&listed, "mcp.method.name").as_deref(),
        Some("tools/list")
    );
    assert_eq!(attribute(&listed, "gen_ai.tool.name"), None);
    assert_eq!(attribute(&listed, "gen_ai.operation.name"), None);
}

#[tokio::test]
async fn the_spans_of_failed_and_refused_calls_say_what_failed() {
    let exported = Exported::install();
    let shop = Shop::open();
    // The caller may refund until the test takes the permission away.
    let may_refund = Arc::new(AtomicBool::new(true));
    let allowed = may_refund.clone();
    let hook = move |_: &Peer<'_>| {
        let mut permissions = vec!["orders:read"];
        if allowed.load(Ordering::SeqCst) {
            permissions.push("refund:create");
        }
        Ok::<_, Refused>(AuthContext::new("acme", "agent").with_permissions(permissions))
    };
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();
    client.list_all_tools().await.unwrap();
    may_refund.store(false, Ordering::SeqCst);

    // Invalid arguments: a result flagged isError.
    let invalid = client
        .call_tool(call("get_order", json!({})))
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    let what = invalid.structured_content.as_ref().unwrap()["error"]["what"]
        .as_str()
        .unwrap()
        .to_owned();
    let served = exported.one("tools/call get_order");
    assert_eq!(
        attribute(&served, "error.type").as_deref(),
        Some("tool_error")
    );
    assert_eq!(error_description(&served), what);
    let ran = exported.one("execute_tool get_order");
    assert_eq!(
        attribute(&ran, "error.type").as_deref(),
        Some("invalid_arguments")
    );
    assert_eq!(error_description(&ran), what);
    assert_eq!(ran.parent_span_id, served.span_context.span_id());

    // A tool the session was listed and may no longer call: the run aborts, and the request is
    // a protocol error.
    let refused = protocol_error(
        client
            .call_tool(call(
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5.0}),
            ))
            .await,
    );
    assert_eq!(refused.code, RUN_ABORTED);
    let served = exported.one("tools/call issue_refund");
    assert_eq!(attribute(&served, "error.type").as_deref(), Some("-32011"));
    assert_eq!(
        attribute(&served, "rpc.response.status_code").as_deref(),
        Some("-32011")
    );
    assert_eq!(error_description(&served), refused.message);
    let ran = exported.one("execute_tool issue_refund");
    assert_eq!(ran.parent_span_id, served.span_context.span_id());
    assert_eq!(
        attribute(&ran, "error.type").as_deref(),
        Some("run_aborted")
    );
    let description = error_description(&ran);
    assert!(
        description.starts_with("the call aborted the run (permission_denied): "),
        "{description}"
    );
    assert_eq!(shop.refunds(), 0);

    // A call of the aborted run: refused before anything of it runs, with a span all the same.
    let later = protocol_error(
        client
            .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
            .await,
    );
    assert_eq!(later.code, RUN_ABORTED);
    let ran = exported.named("execute_tool get_order");
    assert_eq!(ran.len(), 2);
    let served = exported.named("tools/call get_order");
    assert_eq!(ran[1].parent_span_id, served[1].span_context.span_id());
    assert_ne!(ran[1].parent_span_id, SpanId::INVALID);
    assert_eq!(
        attribute(&ran[1], "error.type").as_deref(),
        Some("run_aborted")
    );
    let description = error_description(&ran[1]);
    assert!(
        description.starts_with("the call did not start: the run is aborted (permission_denied): "),
        "{description}"
    );
}
