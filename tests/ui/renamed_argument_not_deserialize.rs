use toolgate::prelude::*;

struct OrderId(String);

/// Look up an order by its id.
#[tool]
async fn get_order(
    /// The order id.
    #[serde(rename = "orderId")]
    order_id: OrderId,
) -> Result<String, ToolError> {
    Ok(order_id.0)
}

fn main() {}
