use toolgate::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Refund {
    /// The order to refund.
    order_id: String,
    /// The amount to refund.
    total: f64,
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write", approval_over = 5000)]
async fn issue_refund(Args(refund): Args<Refund>) -> Result<String, ToolError> {
    Ok(format!("{}: {}", refund.order_id, refund.total))
}

fn main() {}
