//! The sample the provider wire fixtures are recorded from: three tools whose schemas reach every
//! branch of the catalog formats, and batches of call reports for the result formats.
//!
//! `scripts/provider-fixtures/record.py` prints them in every format (with the `wire_samples`
//! example), feeds what it printed to the official OpenAI, Anthropic and Google client libraries,
//! and records what the libraries accepted in `tests/fixtures/providers/`; the root's
//! `provider_fixtures` test checks that toolgate still renders exactly what was recorded.
//!
//! | tool | what its schema holds |
//! |---|---|
//! | [`find_orders()`] | a read: a string, an optional enum, an optional bounded `u8` |
//! | [`ship_replacement()`] | a write: an enum, `u32`, `u64` and `i64` bounds, a nested struct with an optional field, an optional string |
//! | [`tag_order()`] | a write with a map, which neither strict mode nor Gemini's `parameters` can declare (the formats' fallbacks) |
//!
//! The tools' bodies only echo their arguments: the fixtures need their declarations and their
//! results, never their effects.
//!
//! ```
//! use toolgate::provider::format_by_name;
//! use toolgate_demo::wire_samples;
//!
//! let registry = wire_samples::registry();
//! let catalog = format_by_name("anthropic").unwrap().catalog(&registry);
//! assert_eq!(catalog[1]["name"], "ship_replacement");
//! let (case, reports) = &wire_samples::result_cases()[2];
//! assert_eq!((*case, reports.len()), ("parallel", 3));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::tool::JsonText;

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Placed, not paid yet.
    Pending,
    /// Paid.
    Paid,
    /// Refunded in full.
    Refunded,
}

/// Why an order is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// It arrived broken.
    Damaged,
    /// It never arrived.
    Lost,
    /// Something else arrived.
    WrongItem,
}

/// A postal address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Address {
    /// Street and number.
    pub street: String,
    /// The city.
    pub city: String,
    /// The postal code, where the country has them.
    pub postal_code: Option<String>,
}

/// List a customer's orders, newest first.
#[tool(permission = "orders:read")]
pub async fn find_orders(
    /// The customer, such as `CUS-7`.
    customer_id: String,
    /// Only the orders in this state; every order when left out.
    status: Option<OrderStatus>,
    /// At most this many orders, 1 to 50; 10 when left out.
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u8>,
) -> Result<Value, ToolError> {
    Ok(
        json!({"customer_id": customer_id, "status": status, "limit": limit.unwrap_or(10), "orders": []}),
    )
}

/// Ship a replacement for an order that arrived broken, wrong, or not at all.
#[tool(side_effect = "write", permission = "orders:write", key = [order_id])]
pub async fn ship_replacement(
    /// The order being replaced, such as `ORD-1001`.
    order_id: String,
    /// Why it is replaced.
    reason: Reason,
    /// How many items to send.
    quantity: u32,
    /// The parcel's weight, in grams.
    weight_grams: u64,
    /// What to charge (positive) or credit (negative) the customer, in cents.
    adjustment_cents: i64,
    /// Where to send the replacement.
    address: Address,
    /// A note to print on the packing slip.
    gift_note: Option<String>,
) -> Result<Value, ToolError> {
    Ok(json!({
        "order_id": order_id, "reason": reason, "quantity": quantity,
        "weight_grams": weight_grams, "adjustment_cents": adjustment_cents,
        "address": address, "gift_note": gift_note,
    }))
}

/// Label an order with free-form tags, replacing the tags it had.
#[tool(side_effect = "write", permission = "orders:write", key = [order_id])]
pub async fn tag_order(
    /// The order to label, such as `ORD-1001`.
    order_id: String,
    /// The tags, name to value.
    tags: BTreeMap<String, String>,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "tags": tags}))
}

/// A registry with [`find_orders()`], [`ship_replacement()`] and [`tag_order()`], in that order.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<find_orders>()
        .expect("find_orders registers")
        .register::<ship_replacement>()
        .expect("ship_replacement registers")
        .register::<tag_order>()
        .expect("tag_order registers");
    registry
}

/// The batches of results the fixtures render, by name: `success` (one call that succeeded),
/// `error` (one call refused as invalid), `parallel` (three calls: a success, an outcome nobody
/// knows yet, a `not_found`; the third with an id of the form Gemini gives calls that came
/// without one, [`Gemini::generated_id`](toolgate::provider::Gemini::generated_id)).
pub fn result_cases() -> Vec<(&'static str, Vec<CallReport>)> {
    vec![
        ("success", vec![orders_found("call_1")]),
        ("error", vec![invalid_quantity("call_1")]),
        (
            "parallel",
            vec![
                orders_found("call_1"),
                replacement_unknown("call_2"),
                order_not_found("gemini_call_2"),
            ],
        ),
    ]
}

/// The reports of the result case called `name` (see [`result_cases`]), or `None`.
pub fn result_case(name: &str) -> Option<Vec<CallReport>> {
    result_cases()
        .into_iter()
        .find(|(case, _)| *case == name)
        .map(|(_, reports)| reports)
}

fn report(call_id: &str, tool: &str, result: CallResult) -> CallReport {
    CallReport {
        call_id: call_id.into(),
        tool: tool.into(),
        result,
    }
}

fn orders_found(call_id: &str) -> CallReport {
    let data = json!({"orders": [
        {"order_id": "ORD-1001", "status": "paid", "total": "500.00"},
        {"order_id": "ORD-1003", "status": "refunded", "total": "120.00"}
    ]});
    let data = JsonText::of(&data).expect("the sample data is JSON");
    report(call_id, "find_orders", CallResult::succeeded(data))
}

fn invalid_quantity(call_id: &str) -> CallReport {
    let err = ToolError::invalid_arguments("quantity must be at least 1")
        .with_why("/quantity is 0")
        .with_next("call ship_replacement again with a quantity of 1 or more");
    report(call_id, "ship_replacement", CallResult::from_error(&err))
}

fn replacement_unknown(call_id: &str) -> CallReport {
    let err = ToolError::outcome_unknown("the carrier did not answer in time")
        .with_next("ask again later; calling ship_replacement again with the same order is safe");
    report(call_id, "ship_replacement", CallResult::from_error(&err))
}

fn order_not_found(call_id: &str) -> CallReport {
    let err = ToolError::not_found("there is no order ORD-9999")
        .with_why("no order has that id")
        .with_next("check the order id with find_orders");
    report(call_id, "tag_order", CallResult::from_error(&err))
}
