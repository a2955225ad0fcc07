//! `#[serde(...)]` and `#[schemars(...)]` on a parameter reach the generated field: a renamed
//! argument is sent, described, keyed and redacted under its new name, and a default applies.

use serde_json::json;
use toolgate::prelude::*;

fn default_limit() -> u32 {
    20
}

/// Search the orders of a customer.
#[tool(side_effect = "write", key = [customer_id], resource = customer_id)]
async fn search_orders(
    /// The customer.
    #[serde(rename = "customerId")]
    customer_id: String,
    /// The most orders to return.
    #[serde(default = "default_limit")]
    limit: u32,
    /// Words to look for.
    #[serde(rename = "searchText")]
    #[schemars(length(min = 1, max = 100))]
    #[sensitive]
    query: String,
    /// The page of results, from 1.
    #[serde(alias = "p")]
    #[schemars(range(min = 1))]
    page: Option<u32>,
) -> Result<String, ToolError> {
    Ok(format!("{customer_id} {limit} {query} {page:?}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let schema = search_orders::args_schema();
    assert_eq!(schema["required"], json!(["customerId", "searchText"]));
    assert_eq!(
        schema["properties"]["customerId"]["description"],
        "The customer."
    );
    assert_eq!(schema["properties"]["searchText"]["minLength"], 1);
    assert_eq!(schema["properties"]["page"]["minimum"], 1);
    let d = search_orders::descriptor();
    assert_eq!(d.params, &["customerId", "limit", "searchText", "page"]);
    assert_eq!(d.key, &["customerId"]);
    assert_eq!(d.resource, Some("customerId"));
    assert_eq!(d.sensitive, &["searchText"]);

    let mut registry = Registry::new();
    registry.register::<search_orders>().unwrap();
    let dispatcher = Dispatcher::builder(registry).store(toolgate_test::MemoryStore::new()).build();
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let calls = vec![
        ToolCall::new(
            "1",
            "search_orders",
            json!({"customerId": "C-7", "searchText": "shoes"}),
        ),
        ToolCall::new(
            "2",
            "search_orders",
            json!({"customerId": "C-8", "searchText": "hats", "page": 2}),
        ),
    ];
    let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
    assert_eq!(reports[0].result.to_json()["data"], "C-7 20 shoes None");
    assert_eq!(reports[1].result.to_json()["data"], "C-8 20 hats Some(2)");
}
