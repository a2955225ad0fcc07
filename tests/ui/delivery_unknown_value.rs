use toolgate::prelude::*;

/// Record a refund request; a worker sends it to the payment provider.
#[tool(side_effect = "write", delivery = "queue")]
async fn request_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
