use toolgate::prelude::*;

/// Cancel an order that has not shipped.
#[tool(side_effect = "write", key = [order])]
async fn cancel_order(order_id: String, reason: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {reason}"))
}

fn main() {}
