use toolgate::prelude::*;

/// Look up a refund's status.
#[tool(delivery = "outbox")]
async fn refund_status(order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: paid"))
}

fn main() {}
