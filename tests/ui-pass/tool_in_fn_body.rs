//! A tool declared inside a fn body, as a test or an example might.

use toolgate::prelude::*;

fn main() {
    /// Add two numbers.
    #[tool]
    async fn add(a: i64, b: i64) -> Result<i64, ToolError> {
        Ok(a + b)
    }

    let mut registry = Registry::new();
    registry.register::<add>().unwrap();
    assert_eq!(add::descriptor().params, &["a", "b"]);
}
