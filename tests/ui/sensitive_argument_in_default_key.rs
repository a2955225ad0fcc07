use toolgate::prelude::*;

/// Pay an order by card.
#[tool(side_effect = "write")]
async fn pay(order_id: String, amount: f64, #[sensitive] card: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: {amount} by a card of {} digits", card.len()))
}

fn main() {}
