use toolgate::prelude::*;

#[derive(schemars::JsonSchema)]
struct Refund {
    /// The order to refund.
    order_id: String,
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write")]
async fn issue_refund(Args(refund): Args<Refund>) -> Result<String, ToolError> {
    Ok(refund.order_id)
}

fn main() {}
