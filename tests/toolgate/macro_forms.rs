//! Every supported form of `#[tool]`, checked through the descriptor, the schema and a dispatch.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::{
    Tool,
    tool::{KeyScope, RateLimit, RetrySpec},
};

/// Look up an order by its id.
#[tool(permission = "orders:read", timeout = "2s")]
async fn get_order(
    /// The order id, such as `ORD-1001`.
    order_id: String,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id}))
}

/// Refund part or all of a paid order. The refund is final.
#[tool(
    side_effect = "write",
    permission = "refund:create",
    approval_over = 5000,
    key = [order_id],
    key_scope = "tenant",
    timeout = "10s",
    retry(max_attempts = 4, base = "100ms", max = "5s", jitter = true),
    rate_limit = "20/min",
    reconcile = find_refund,
    resource = order_id,
    approver = "refund:approve",
    approval_ttl = "2h",
    check = at_most_1000(amount, ctx)
)]
async fn issue_refund(
    ctx: &Ctx,
    /// The order to refund.
    order_id: String,
    /// The amount, in the order's currency.
    amount: f64,
    /// A note for the customer.
    #[sensitive]
    note: Option<String>,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "amount": amount, "note": note, "run": ctx.run_id()}))
}

async fn find_refund(
    ctx: &Ctx,
    order_id: String,
    amount: f64,
    note: Option<String>,
) -> Result<Option<Value>, ToolError> {
    let _ = (ctx, order_id, amount, note);
    Ok(None)
}

/// A business check taking a subset of the tool's parameters, in an order of its own.
async fn at_most_1000(amount: f64, ctx: &Ctx) -> Result<(), ToolError> {
    if amount > 1000.0 {
        return Err(ToolError::refused(format!("{amount} is over 1000"))
            .with_why(format!(
                "the tenant {} refunds at most 1000",
                ctx.auth().tenant()
            ))
            .with_next("offer at most 1000"));
    }
    Ok(())
}

/// Preview a refund without issuing it.
#[tool(check = known_order)]
async fn preview_refund(
    /// The order to preview a refund of.
    order_id: String,
) -> Result<String, ToolError> {
    Ok(format!("would refund {order_id}"))
}

/// A read's check, taking every parameter of the tool as the bare `check = path` passes them.
async fn known_order(order_id: String) -> Result<(), ToolError> {
    if order_id.starts_with("ORD-") {
        Ok(())
    } else {
        Err(ToolError::not_found(format!(
            "there is no order {order_id}"
        )))
    }
}

/// Run the business check of another tool on arguments given as JSON text, with this call's
/// context, the way the dispatcher calls `Tool::check`.
#[tool]
async fn run_check(ctx: &Ctx, tool: String, args: String) -> Result<Value, ToolError> {
    let args: Value = serde_json::from_str(&args).expect("the test sends JSON");
    let check = match tool.as_str() {
        "issue_refund" => Tool::check(&issue_refund {}, ctx, &args),
        "preview_refund" => Tool::check(&preview_refund {}, ctx, &args),
        _ => Tool::check(&hello {}, ctx, &args),
    };
    Ok(match check {
        None => json!("no check"),
        Some(check) => match check.await {
            Ok(()) => json!("passed"),
            Err(err) => {
                json!({"kind": err.kind().as_str(), "what": err.what(), "why": err.why()})
            }
        },
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct CloseRequest {
    /// The account to close.
    account_id: String,
    /// The balance to pay out.
    payout: u32,
}

#[derive(Serialize)]
struct Closed {
    account_id: String,
}

/// Close an account for good.
#[tool(side_effect = "destructive", name = "close-account", key = [account_id], approval_over = 100.5, approval_field = payout)]
async fn close_account(
    Args(request): Args<CloseRequest>,
    auth: &AuthContext,
) -> Result<Closed, ToolError> {
    Ok(Closed {
        account_id: format!("{}:{}", auth.tenant(), request.account_id),
    })
}

/// Say hello.
#[tool]
async fn hello() -> Result<&'static str, ToolError> {
    Ok("hello")
}

#[test]
fn descriptors_record_every_key() {
    let d = issue_refund::descriptor();
    assert_eq!(d.name, "issue_refund");
    assert_eq!(
        d.doc,
        "Refund part or all of a paid order. The refund is final."
    );
    assert_eq!(d.side_effect, SideEffect::Write);
    assert_eq!(d.permission, Some("refund:create"));
    let approval = d.approval.unwrap();
    assert_eq!((approval.over, approval.field), (5000.0, "amount"));
    assert_eq!(approval.approver, Some("refund:approve"));
    assert_eq!(approval.approver_permission(d.name), "refund:approve");
    assert_eq!(approval.ttl, Some(std::time::Duration::from_secs(7200)));
    assert_eq!(d.check, Some("at_most_1000"));
    assert_eq!(d.key, &["order_id"]);
    assert_eq!(d.key_scope, KeyScope::Tenant);
    assert_eq!(d.timeout, Some(std::time::Duration::from_secs(10)));
    assert_eq!(
        d.retry,
        RetrySpec {
            max_attempts: Some(4),
            base: Some(std::time::Duration::from_millis(100)),
            max: Some(std::time::Duration::from_secs(5)),
            jitter: Some(true),
        }
    );
    assert_eq!(
        d.rate_limit,
        Some(RateLimit::new(20, std::time::Duration::from_secs(60)))
    );
    assert_eq!(d.reconcile, Some("find_refund"));
    assert_eq!(d.resource, Some("order_id"));
    assert_eq!(d.params, &["order_id", "amount", "note"]);
    assert_eq!(d.sensitive, &["note"]);

    let d = close_account::descriptor();
    assert_eq!(d.name, "close-account");
    assert_eq!(d.side_effect, SideEffect::Destructive);
    assert_eq!(d.approval.unwrap().field, "payout");
    assert_eq!(d.approval.unwrap().over, 100.5);
    // Without `approver` and `approval_ttl`: the default permission, the dispatcher's wait.
    assert_eq!(d.approval.unwrap().approver, None);
    assert_eq!(
        d.approval.unwrap().approver_permission(d.name),
        "close-account:approve"
    );
    assert_eq!(d.approval.unwrap().ttl, None);
    assert_eq!(d.check, None);

    assert_eq!(preview_refund::descriptor().check, Some("known_order"));

    let d = hello::descriptor();
    assert_eq!(
        (d.side_effect, d.permission, d.timeout),
        (SideEffect::Read, None, None)
    );
}

#[test]
fn schemas_describe_plain_parameters_and_skip_the_context() {
    let schema = issue_refund::args_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let properties = schema["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["order_id", "amount", "note"]
    );
    assert_eq!(
        properties["order_id"]["description"],
        "The order to refund."
    );
    assert_eq!(
        properties["amount"]["description"],
        "The amount, in the order's currency."
    );
    assert_eq!(schema["required"], json!(["order_id", "amount"]));

    let schema = close_account::args_schema();
    assert_eq!(
        schema["properties"]["account_id"]["description"],
        "The account to close."
    );
    assert_eq!(
        schema["additionalProperties"], false,
        "unknown fields are rejected for Args<T> too"
    );

    let schema = hello::args_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"], json!({}));
}

#[tokio::test]
async fn every_form_dispatches() {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .unwrap()
        .register::<issue_refund>()
        .unwrap()
        .register::<close_account>()
        .unwrap()
        .register::<hello>()
        .unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(toolgate_test::MemoryStore::new())
        .build();
    let session = Session::new(
        crate::support::agent().with_permissions(["orders:read", "refund:create"]),
        "run-1",
    );
    let calls = vec![
        ToolCall::new("1", "get_order", json!({"order_id": "ORD-1"})),
        ToolCall::new(
            "2",
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 5, "note": null}),
        ),
        ToolCall::new(
            "3",
            "close-account",
            json!({"account_id": "A-1", "payout": 3.0}),
        ),
        ToolCall::new("4", "hello", json!({})),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    let data: Vec<Value> = reports
        .iter()
        .map(|r| r.result.to_json()["data"].clone())
        .collect();
    assert_eq!(data[0], json!({"order_id": "ORD-1"}));
    assert_eq!(
        data[1],
        json!({"order_id": "ORD-1", "amount": 5.0, "note": null, "run": "run-1"})
    );
    assert_eq!(data[2], json!({"account_id": "acme:A-1"}));
    assert_eq!(data[3], json!("hello"));
}

#[tokio::test]
async fn the_fn_stays_callable_as_written() {
    assert_eq!(hello().await.unwrap(), "hello");
}

#[tokio::test]
async fn checks_take_the_parameters_they_name_and_answer_the_error_they_return() {
    let mut registry = Registry::new();
    registry
        .register::<run_check>()
        .unwrap()
        .register::<issue_refund>()
        .unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(toolgate_test::MemoryStore::new())
        .build();
    let session = crate::support::session();
    let check = |id: &str, tool: &str, args: Value| {
        ToolCall::new(
            id,
            "run_check",
            json!({"tool": tool, "args": args.to_string()}),
        )
    };
    let calls = vec![
        check(
            "1",
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 1000, "note": null}),
        ),
        check(
            "2",
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 1000.5, "note": null}),
        ),
        check("3", "preview_refund", json!({"order_id": "ORD-1"})),
        check("4", "preview_refund", json!({"order_id": "X-1"})),
        check("5", "hello", json!({})),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    let data: Vec<Value> = reports
        .iter()
        .map(|r| r.result.to_json()["data"].clone())
        .collect();
    assert_eq!(data[0], json!("passed"));
    assert_eq!(
        data[1],
        json!({
            "kind": "refused",
            "what": "1000.5 is over 1000",
            "why": "the tenant acme refunds at most 1000",
        })
    );
    assert_eq!(data[2], json!("passed"));
    assert_eq!(
        data[3],
        json!({"kind": "not_found", "what": "there is no order X-1", "why": null})
    );
    assert_eq!(data[4], json!("no check"));
}

/// A tool of more plain parameters than the shared field reader takes (64): serde's derive
/// reads them, and the table of fields describes them, as it does for every tool with docs alone.
macro_rules! wide_tool {
    ($($param:ident),*) => {
        /// Adds up its parameters.
        #[tool]
        async fn wide($($param: u8),*) -> Result<u32, ToolError> {
            Ok(0 $(+ u32::from($param))*)
        }
    };
}

wide_tool!(
    a00, a01, a02, a03, a04, a05, a06, a07, a08, a09, a10, a11, a12, a13, a14, a15, a16, a17, a18,
    a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37,
    a38, a39, a40, a41, a42, a43, a44, a45, a46, a47, a48, a49, a50, a51, a52, a53, a54, a55, a56,
    a57, a58, a59, a60, a61, a62, a63, a64
);

#[tokio::test]
async fn a_tool_of_more_than_64_parameters_is_described_and_dispatched() {
    let schema = wide::args_schema();
    let properties = schema["properties"].as_object().unwrap();
    assert_eq!(properties.len(), 65);
    assert_eq!(properties["a64"]["maximum"], 255);
    assert_eq!(schema["required"].as_array().unwrap().len(), 65);
    assert_eq!(schema["additionalProperties"], false);

    let mut registry = Registry::new();
    registry.register::<wide>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(toolgate_test::MemoryStore::new())
        .build();
    let session = crate::support::session();
    let mut args: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("a{i:02}"), json!(2))).collect();
    let all = ToolCall::new("1", "wide", Value::Object(args.clone()));
    args.remove("a64");
    let short = ToolCall::new("2", "wide", Value::Object(args));
    let reports = dispatcher
        .dispatch_turn(&session, vec![all, short])
        .await
        .unwrap();
    assert_eq!(reports[0].result.to_json()["data"], json!(130));
    let refused = reports[1].result.to_json();
    assert_eq!(refused["error"]["kind"], "invalid_arguments", "{refused}");
    assert_eq!(refused["error"]["why"], "/: \"a64\" is a required property");
}

/// Looks up an order, its parameters documented in each way a doc can be written.
#[tool]
async fn documented(
    /// # Order
    /// The order to look up,
    ///   its second line indented.
    order_id: String,
    #[doc = concat!("Computed ", "by a macro.")] limit: Option<u32>,
    tags: Vec<String>,
) -> Result<u32, ToolError> {
    let _ = (order_id, tags);
    Ok(limit.unwrap_or(0))
}

/// The same parameters as one struct under schemars' derive, with the same docs.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DocumentedArgs {
    /// # Order
    /// The order to look up,
    ///   its second line indented.
    order_id: String,
    #[doc = concat!("Computed ", "by a macro.")]
    limit: Option<u32>,
    tags: Vec<String>,
}

#[test]
fn plain_parameters_are_described_as_schemars_describes_their_struct() {
    let mut derived = toolgate::schema::canonical_schema_for::<DocumentedArgs>();
    // The struct's own doc; the parameters of a tool have none.
    derived.as_object_mut().unwrap().remove("description");
    let described = documented::args_schema();
    assert_eq!(described.to_string(), derived.to_string());
    assert_eq!(described["properties"]["order_id"]["title"], "Order");
    assert_eq!(
        described["properties"]["limit"]["description"],
        "Computed by a macro."
    );
}
