//! The same turn answered through rmcp's tool router: the tool a route of rmcp's `ToolRouter`,
//! as `#[tool_router]` would make it (its arguments deserialized from the JSON object an MCP
//! `tools/call` carries, as `Parameters<T>` does), routed by name, its result the text content
//! of a `CallToolResult`. What an rmcp server does for a call between its transport and its
//! tool, measured on the turn the other paths answer. The route is written out, not made by
//! rmcp's macros: their feature, unified into the facade's rmcp, changes the compiler errors
//! `tests/ui` holds.

use std::sync::Arc;

use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    NumberOrString, Tool,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::by_hand;

/// The arguments of `get_order`, as the route deserializes them.
#[derive(Deserialize)]
struct GetOrderArgs {
    order_id: String,
}

/// A server of the one tool.
#[derive(Clone)]
pub(crate) struct Orders;

impl ServerHandler for Orders {}

/// `get_order` as a route of rmcp's router.
fn route() -> ToolRoute<Orders> {
    let Value::Object(schema) = json!({
        "type": "object",
        "properties": {"order_id": {"type": "string", "description": "The order id."}},
        "required": ["order_id"],
    }) else {
        unreachable!("an object")
    };
    let attr = Tool::new("get_order", "Look up an order.", Arc::new(schema));
    ToolRoute::new_dyn(attr, |context: ToolCallContext<'_, Orders>| {
        Box::pin(async move {
            let arguments = Value::Object(context.arguments.unwrap_or_default());
            let args: GetOrderArgs = serde_json::from_value(arguments)
                .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
            let order = crate::lookup(args.order_id)
                .await
                .map_err(|err| ErrorData::invalid_params(err.what().to_owned(), None))?;
            let text = serde_json::to_string(&by_hand::Envelope {
                status: "succeeded",
                replayed: false,
                data: &order,
            })
            .map_err(|err| ErrorData::internal_error(err.to_string(), None))?;
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text(text),
            ])))
        })
    })
}

#[derive(Clone, Default)]
struct Client;

impl ClientHandler for Client {}

/// The router, the server and a peer to make each call's request context with: the peer of a
/// server session served over an in-memory stream, as a call's context has one.
pub(crate) struct Router {
    router: ToolRouter<Orders>,
    server: Orders,
    peer: Peer<RoleServer>,
    _running: (
        RunningService<RoleServer, Orders>,
        RunningService<RoleClient, Client>,
    ),
}

impl Router {
    pub(crate) async fn start() -> Router {
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let (server, client) = tokio::join!(Orders.serve(server_io), Client.serve(client_io));
        let server = server.expect("the server starts");
        let client = client.expect("the client starts");
        Router {
            router: ToolRouter::new().with_route(route()),
            server: Orders,
            peer: server.peer().clone(),
            _running: (server, client),
        }
    }

    /// The turn's `role: "tool"` messages, each call routed by rmcp's router.
    pub(crate) async fn answer(&self, turn: &str) -> String {
        let mut message: by_hand::Message = serde_json::from_str(turn).unwrap();
        let mut out = Vec::with_capacity(message.tool_calls.len());
        for call in &mut message.tool_calls {
            let arguments: JsonObject = serde_json::from_str(&call.function.arguments).unwrap();
            let name = std::mem::take(&mut call.function.name);
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            let context = RequestContext::new(NumberOrString::Number(1), self.peer.clone());
            let response = self
                .router
                .call(ToolCallContext::new(&self.server, params, context))
                .await
                .unwrap();
            let CallToolResponse::Complete(result) = response else {
                panic!("the call completes");
            };
            let Some(ContentBlock::Text(content)) = result.content.into_iter().next() else {
                panic!("a text content");
            };
            out.push(by_hand::ToolMessage {
                role: "tool",
                tool_call_id: &call.id,
                content: content.text,
            });
        }
        serde_json::to_string(&out).unwrap()
    }
}
