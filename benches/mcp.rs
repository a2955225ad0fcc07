//! One MCP `tools/call` of a small read tool, three ways in one run:
//!
//! - `in_process`: the same call dispatched in process, no protocol: a `ToolCall` through
//!   `Dispatcher::dispatch` (look-up, validation, authorisation, the deadline, the trace span)
//!   and the `CallToolResult` of `Mcp::call_result`, serialised;
//! - `hand_written_rmcp`: an `rmcp` server whose `ServerHandler` is written by hand for the one
//!   tool: it deserializes the arguments with serde, calls the fn and answers
//!   `CallToolResult::structured` with the same result object toolgate sends
//!   (`{"status":"succeeded","replayed":false,"data":…}`);
//! - `toolgate_mcp`: `toolgate::mcp::McpServer` serving a dispatcher of the same tool.
//!
//! Both servers are driven by the same `rmcp` client over the same transport: the two ends of an
//! in-memory byte stream (`tokio::io::duplex`), which is what stdio is to the server (newline
//! delimited JSON-RPC over a pair of byte streams) without the operating system's pipes. The
//! client, the server and the calls run on one current-thread tokio runtime, so no figure
//! depends on how the machine schedules threads.
//!
//! All three answer the same result object (checked before measuring). The figures that matter
//! are the ratios: `toolgate_mcp ÷ hand_written_rmcp` (what the pipeline costs over a bare rmcp
//! server) and `toolgate_mcp ÷ in_process` (what the protocol costs). Run with
//! `cargo bench --bench mcp`.
//!
//! Criterion measures one function after the other, so a load on the machine that comes and
//! goes can fall on one of them only. After criterion, the bench times the two servers again in
//! interleaved rounds (100 calls of each a round, 200 rounds, the one going first alternating)
//! and prints their medians and `toolgate_mcp ÷ hand_written_rmcp`: the ratio to quote.
//!
//! Instructions per call, which no other load on the machine changes: with
//! `TOOLGATE_MCP_CALLS=N` (and `TOOLGATE_MCP_SERVER=toolgate` or `hand_written`), the bench makes
//! N calls of that server's client and exits. Run it under callgrind twice, with N and 2N
//! calls; the difference of the two totals, over N, is one call, client and server, without
//! the set-up:
//!
//! ```sh
//! for server in toolgate hand_written; do for n in 2000 4000; do
//!   TOOLGATE_MCP_SERVER=$server TOOLGATE_MCP_CALLS=$n valgrind --tool=callgrind \
//!     --callgrind-out-file=/dev/null target/release/deps/mcp-HASH 2>&1 | grep Collected
//! done; done
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use toolgate::mcp::{McpServer, StdioSession};
use toolgate::prelude::*;
use toolgate::provider::Mcp;

#[derive(Serialize)]
struct Order {
    order_id: String,
    paid: &'static str,
}

async fn lookup(order_id: String) -> Result<Order, ToolError> {
    Ok(Order {
        order_id,
        paid: "500.00",
    })
}

/// Look up an order.
#[tool(permission = "orders:read", timeout = "5s")]
async fn get_order(
    /// The order id.
    order_id: String,
) -> Result<Order, ToolError> {
    lookup(order_id).await
}

fn auth() -> AuthContext {
    AuthContext::new("acme", "bench").with_permissions(["orders:read"])
}

fn dispatcher() -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    // Every iteration is a call in the same run: no run limit is reached.
    Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .build()
}

fn arguments() -> JsonObject {
    let Value::Object(arguments) = json!({"order_id": "ORD-1001"}) else {
        unreachable!("an object literal")
    };
    arguments
}

fn request() -> CallToolRequestParams {
    CallToolRequestParams::new("get_order").with_arguments(arguments())
}

/// The arguments of the hand-written server's one tool.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetOrderArgs {
    /// The order id.
    order_id: String,
}

/// An rmcp server written by hand for `get_order`: what a team writes without toolgate.
#[derive(Clone)]
struct HandWritten {
    tool: Tool,
}

impl HandWritten {
    fn new() -> Self {
        let schema = serde_json::to_value(schemars::schema_for!(GetOrderArgs)).unwrap();
        let Value::Object(schema) = schema else {
            unreachable!("a schema of a struct is an object")
        };
        HandWritten {
            tool: Tool::new("get_order", "Look up an order.", Arc::new(schema)),
        }
    }
}

impl ServerHandler for HandWritten {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "get_order" {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let args: GetOrderArgs = match serde_json::from_value(arguments) {
            Ok(args) => args,
            Err(error) => {
                return Ok(CallToolResponse::Complete(
                    CallToolResult::structured_error(
                        json!({"status": "error", "error": {"kind": "invalid_arguments",
                        "what": error.to_string()}}),
                    ),
                ));
            }
        };
        let result = match lookup(args.order_id).await {
            Ok(order) => json!({"status": "succeeded", "replayed": false, "data": order}),
            Err(_) => unreachable!("lookup finds every order"),
        };
        Ok(CallToolResponse::Complete(CallToolResult::structured(
            result,
        )))
    }
}

type Client = RunningService<RoleClient, ClientConfig>;

/// A client connected to a server served on `serve`, through an in-memory byte stream.
async fn connect<F, Fut>(serve: F) -> Client
where
    F: FnOnce(tokio::io::DuplexStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(server_io));
    ClientConfig::new(Default::default(), Implementation::new("bench", "1.0"))
        .serve(client_io)
        .await
        .unwrap()
}

async fn call(client: &Client) -> Value {
    let result = client.call_tool(request()).await.unwrap();
    result.structured_content.unwrap()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Clients of the toolgate server and of the hand-written one.
fn clients(rt: &Runtime) -> (Client, Client) {
    let server = McpServer::builder(dispatcher(), StdioSession::new(auth()))
        .name("bench")
        .build();
    let toolgate_client = rt.block_on(connect(move |io| async move {
        if let Err(error) = server.serve(io).await {
            eprintln!("the toolgate server stopped: {error}");
        }
    }));
    let hand_written_client = rt.block_on(connect(|io| async move {
        match HandWritten::new().serve(io).await {
            Ok(running) => drop(running.waiting().await),
            Err(error) => eprintln!("the hand-written server stopped: {error}"),
        }
    }));
    (toolgate_client, hand_written_client)
}

/// `calls` calls of `server`'s client, for callgrind.
fn counted(calls: usize, server: &str) {
    let rt = runtime();
    let (toolgate_client, hand_written_client) = clients(&rt);
    let client = match server {
        "toolgate" => &toolgate_client,
        "hand_written" => &hand_written_client,
        other => panic!("TOOLGATE_MCP_SERVER is toolgate or hand_written, not {other}"),
    };
    rt.block_on(async {
        for _ in 0..calls {
            black_box(call(client).await);
        }
    });
}

/// The two servers' calls timed in interleaved rounds, each round `calls` calls of each client,
/// the one going first alternating: a load on the machine that comes and goes falls on both.
/// Prints each one's median time per call and their ratio.
fn interleaved(rounds: usize, calls: u32) {
    let rt = runtime();
    let (toolgate_client, hand_written_client) = clients(&rt);
    let time = |client: &Client| {
        let started = Instant::now();
        for _ in 0..calls {
            black_box(rt.block_on(call(client)));
        }
        started.elapsed() / calls
    };
    // Untimed first rounds: buffers grown, caches warm.
    for _ in 0..10 {
        time(&toolgate_client);
        time(&hand_written_client);
    }
    let (mut toolgate, mut hand_written) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            toolgate.push(time(&toolgate_client));
            hand_written.push(time(&hand_written_client));
        } else {
            hand_written.push(time(&hand_written_client));
            toolgate.push(time(&toolgate_client));
        }
    }
    let (toolgate, hand_written) = (median(&mut toolgate), median(&mut hand_written));
    println!(
        "interleaved, {rounds} rounds of {calls} calls, medians per call: \
         hand_written_rmcp {hand_written:.2?}, toolgate_mcp {toolgate:.2?}, \
         ratio {:.3}",
        toolgate.as_secs_f64() / hand_written.as_secs_f64()
    );
}

/// The median of `times`, sorted in place.
fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn bench(c: &mut Criterion) {
    let runtime = runtime();
    let rt: &Runtime = &runtime;

    let in_process = dispatcher();
    let session = Session::new(auth(), "bench-run");
    let dispatch_once = || async {
        let call = ToolCall::new("call_1", "get_order", Value::Object(arguments()));
        let report = in_process.dispatch(&session, call).await.unwrap();
        serde_json::to_string(&Mcp::call_result(&report).unwrap().to_json()).unwrap()
    };

    let (toolgate_client, hand_written_client) = clients(rt);

    // The three answer the same result object.
    let expected = json!({"status": "succeeded", "replayed": false,
        "data": {"order_id": "ORD-1001", "paid": "500.00"}});
    let in_process_answer: Value = serde_json::from_str(&rt.block_on(dispatch_once())).unwrap();
    assert_eq!(in_process_answer["structuredContent"], expected);
    assert_eq!(rt.block_on(call(&toolgate_client)), expected);
    assert_eq!(rt.block_on(call(&hand_written_client)), expected);

    let mut group = c.benchmark_group("mcp_tools_call");
    group.bench_function("in_process", |b| {
        b.iter(|| black_box(rt.block_on(dispatch_once())))
    });
    group.bench_function("hand_written_rmcp", |b| {
        b.iter(|| black_box(rt.block_on(call(&hand_written_client))))
    });
    group.bench_function("toolgate_mcp", |b| {
        b.iter(|| black_box(rt.block_on(call(&toolgate_client))))
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(calls) = std::env::var("TOOLGATE_MCP_CALLS") {
        let calls = calls
            .parse()
            .expect("TOOLGATE_MCP_CALLS is a number of calls");
        let server = std::env::var("TOOLGATE_MCP_SERVER").unwrap_or_else(|_| "toolgate".into());
        counted(calls, &server);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Not under `cargo test --benches`, which runs each bench once to check it.
    if !std::env::args().any(|arg| arg == "--test") {
        interleaved(200, 100);
    }
}
