use toolgate::prelude::*;

/// Preview a refund without issuing it.
#[tool(approval_over = 5000)]
async fn preview_refund(order_id: String, amount: f64) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount}"))
}

fn main() {}
