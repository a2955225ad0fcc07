use toolgate::prelude::*;

#[derive(serde::Deserialize)]
struct Address {
    street: String,
    city: String,
}

/// Ship an order.
#[tool(side_effect = "write")]
async fn ship_order(order_id: String, address: Option<Address>) -> Result<String, ToolError> {
    Ok(format!("{order_id} {:?}", address.map(|a| (a.street, a.city))))
}

fn main() {}
