//! What the MCP server tests share: a small shop (a read and a write that counts its runs and
//! can be held at a gate), a server on it, and an SDK client talking to it over an in-memory
//! duplex stream.

#![allow(dead_code, unreachable_pub)]

pub mod raw_http;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::{ErrorData, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use toolgate::mcp::{McpServer, ServeError, SessionHook};
use toolgate::prelude::*;
use toolgate_test::MemoryStore;

/// How long a test waits for something that should happen at once.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// What the tools share with the test.
pub struct Shop {
    /// Refunds applied: what a payment provider's ledger would count.
    pub refunds: AtomicUsize,
    /// A refund has started.
    pub entered: Notify,
    /// Refunds wait for a permit before they apply; open unless a test closes it.
    pub gate: Semaphore,
}

impl Shop {
    /// A shop whose refunds apply at once.
    pub fn open() -> Arc<Shop> {
        Arc::new(Shop {
            refunds: AtomicUsize::new(0),
            entered: Notify::new(),
            gate: Semaphore::new(Semaphore::MAX_PERMITS),
        })
    }

    /// A shop whose refunds wait at the gate until [`Shop::release`].
    pub fn gated() -> Arc<Shop> {
        Arc::new(Shop {
            refunds: AtomicUsize::new(0),
            entered: Notify::new(),
            gate: Semaphore::new(0),
        })
    }

    /// Lets the refunds waiting at the gate, and every later one, apply.
    pub fn release(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS);
    }

    /// How many refunds applied.
    pub fn refunds(&self) -> usize {
        self.refunds.load(Ordering::SeqCst)
    }
}

/// Look up an order.
#[tool(permission = "orders:read")]
async fn get_order(
    /// The order, such as `ORD-1`.
    order_id: String,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "paid": "500.00"}))
}

/// Refund an order. The refund is final.
#[tool(side_effect = "write", permission = "refund:create", key = [order_id], timeout = "2h")]
async fn issue_refund(
    shop: State<Arc<Shop>>,
    key: &IdempotencyKey,
    /// The order to refund.
    order_id: String,
    /// The amount, above zero.
    #[schemars(range(min = 0.01))]
    amount: f64,
) -> Result<Value, ToolError> {
    shop.entered.notify_one();
    let _permit = shop.gate.acquire().await.expect("the gate is never closed");
    let number = shop.refunds.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(
        json!({"refund": format!("re_{number}"), "order_id": order_id, "amount": amount, "key": key.to_string()}),
    )
}

/// A dispatcher on the shop, its operations in memory.
pub fn dispatcher(shop: &Arc<Shop>) -> Dispatcher {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .unwrap()
        .register::<issue_refund>()
        .unwrap();
    Dispatcher::builder(registry)
        .store(MemoryStore::new())
        .state(shop.clone())
        // A duplicate of a running write waits for it (the cancellation test) up to here.
        .in_progress_wait(PATIENCE)
        .build()
}

/// The shop's server, its clients identified by `hook`.
pub fn server(shop: &Arc<Shop>, hook: impl SessionHook) -> McpServer {
    McpServer::builder(dispatcher(shop), hook)
        .name("test-shop")
        .version("1.2.3")
        .instructions("Refund orders.")
        .build()
}

/// A session of `tenant` holding `permissions`.
pub fn session(tenant: &str, permissions: &[&str]) -> Session {
    let auth = AuthContext::new(tenant, "agent").with_permissions(permissions.iter().copied());
    Session::new(auth, format!("run-{tenant}"))
}

/// A client connected to `server` through an in-memory stream, introducing itself as
/// `client_name`, and the task serving it.
pub async fn connect(
    server: &McpServer,
    client_name: &str,
) -> (
    Result<RunningService<RoleClient, ClientConfig>, rmcp::service::ClientInitializeError>,
    JoinHandle<Result<(), ServeError>>,
) {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = server.clone();
    let serving = tokio::spawn(async move { server.serve(server_io).await });
    let config = ClientConfig::new(Default::default(), Implementation::new(client_name, "1.0"));
    (config.serve(client_io).await, serving)
}

/// A call of `tool` with `arguments` (a JSON object).
pub fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = Some(arguments);
    params
}

/// The result object of a call: its `structuredContent`, checked to be what its one text item
/// says.
pub fn result_object(result: &CallToolResult) -> Value {
    let structured = result
        .structured_content
        .clone()
        .expect("every result carries structuredContent");
    let text = result.content[0]
        .as_text()
        .expect("the one content item is text");
    assert_eq!(result.content.len(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(&text.text).unwrap(),
        structured
    );
    structured
}

/// The protocol error of a request that failed with one.
pub fn protocol_error(result: Result<impl std::fmt::Debug, ServiceError>) -> ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("not a protocol error: {other:?}"),
    }
}
