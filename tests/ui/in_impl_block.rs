use toolgate::prelude::*;

struct Orders;

impl Orders {
    /// Look up an order by its id.
    #[tool]
    async fn get_order(order_id: String) -> Result<String, ToolError> {
        Ok(order_id)
    }
}

fn main() {}
