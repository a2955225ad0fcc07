//! `crate = path` for a program that imports the facade under another name: every generated
//! path goes through it.

use my_alias::prelude::{Ctx, IdempotencyKey, Registry, State, ToolError};
use toolgate as my_alias;

struct Ledger;

/// Look up an order by its id.
#[my_alias::prelude::tool(crate = my_alias)]
async fn get_order(ctx: &Ctx, order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id} in {}", ctx.run_id()))
}

/// Post an entry to the ledger.
#[my_alias::prelude::tool(crate = my_alias, side_effect = "write", reconcile = find_entry(key))]
async fn post_entry(
    _ledger: State<Ledger>,
    key: &IdempotencyKey,
    entry: String,
) -> Result<String, ToolError> {
    Ok(format!("{entry} under {key}"))
}

/// Asks the ledger for the entry under the key.
async fn find_entry(key: &IdempotencyKey) -> Result<Option<String>, ToolError> {
    Ok(Some(key.to_string()))
}

fn main() {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    registry.register::<post_entry>().unwrap();
    assert_eq!(get_order::descriptor().name, "get_order");
    assert_eq!(get_order::args_schema()["required"][0], "order_id");
    assert_eq!(post_entry::descriptor().reconcile, Some("find_entry"));
}
