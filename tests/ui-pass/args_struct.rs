//! One `Args<T>` parameter holds every argument; `key`, `resource` and `approval_field` name its
//! fields, and the struct's attributes shape the schema.

use serde::Deserialize;
use toolgate::prelude::*;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RefundRequest {
    /// The order to refund.
    order_id: String,
    /// The amount, in cents.
    refund_cents: u64,
    /// Why the customer asked.
    reason: Option<String>,
}

/// Refund part or all of a paid order. The refund is final.
#[tool(side_effect = "write", key = [order_id], resource = order_id, approval_over = 50000, approval_field = refund_cents)]
async fn issue_refund(Args(request): Args<RefundRequest>) -> Result<String, ToolError> {
    Ok(format!(
        "{} {} {:?}",
        request.order_id, request.refund_cents, request.reason
    ))
}

/// Preview a refund; the struct may also be bound whole.
#[tool]
async fn preview_refund(request: Args<RefundRequest>) -> Result<u64, ToolError> {
    Ok(request.0.refund_cents)
}

fn main() {
    let schema = issue_refund::args_schema();
    assert_eq!(
        schema["properties"]["orderId"]["description"],
        "The order to refund."
    );
    assert_eq!(schema["additionalProperties"], false);
    let d = issue_refund::descriptor();
    assert_eq!(d.key, &["order_id"]);
    assert_eq!(d.approval.unwrap().field, "refund_cents");
    assert!(
        d.params.is_empty(),
        "the struct's fields are described by the schema"
    );
    assert_eq!(preview_refund::args_schema(), schema);
}
