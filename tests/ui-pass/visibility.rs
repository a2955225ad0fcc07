//! A tool's type has the visibility of its fn: `pub` and `pub(crate)` tools are registered from
//! outside their module.

use toolgate::prelude::*;

mod tools {
    use toolgate::prelude::*;

    /// Look up an order by its id.
    #[tool]
    pub async fn get_order(order_id: String) -> Result<String, ToolError> {
        Ok(order_id)
    }

    /// Count the orders of a customer.
    #[tool]
    pub(crate) async fn count_orders(customer_id: String) -> Result<usize, ToolError> {
        Ok(customer_id.len())
    }

    pub mod admin {
        use toolgate::prelude::*;

        /// Close the store for the day.
        #[tool(side_effect = "write")]
        pub(super) async fn close_store() -> Result<(), ToolError> {
            Ok(())
        }

        pub fn register(registry: &mut Registry) {
            registry.register::<close_store>().unwrap();
        }
    }
}

fn main() {
    let mut registry = Registry::new();
    registry
        .register::<tools::get_order>()
        .unwrap()
        .register::<tools::count_orders>()
        .unwrap();
    tools::admin::register(&mut registry);
    assert_eq!(registry.len(), 3);
    assert_eq!(tools::get_order::descriptor().name, "get_order");
}
