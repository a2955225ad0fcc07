//! The demo shop of the refund desk: four orders and the two tools the model may call.
//!
//! Shared by the examples with `#[path = "shop/mod.rs"] mod shop;`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;
use toolgate::prelude::*;

/// One order of the shop, amounts in cents.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order {
    /// What the customer paid.
    pub(crate) paid_cents: u64,
    /// What has been refunded so far.
    pub(crate) refunded_cents: u64,
}

/// The shop's orders: the system of record the tools read and change.
#[derive(Debug)]
pub(crate) struct Shop {
    orders: Mutex<BTreeMap<&'static str, Order>>,
}

impl Default for Shop {
    fn default() -> Self {
        let orders = [
            ("ORD-1001", 50_000, 0),
            ("ORD-1002", 800_000, 0),
            ("ORD-1003", 12_000, 2_000),
            ("ORD-1004", 7_550, 0),
        ]
        .into_iter()
        .map(|(id, paid_cents, refunded_cents)| {
            (
                id,
                Order {
                    paid_cents,
                    refunded_cents,
                },
            )
        })
        .collect();
        Shop {
            orders: Mutex::new(orders),
        }
    }
}

/// "500.00" from 50000.
pub(crate) fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

impl Shop {
    fn order(&self, order_id: &str) -> Result<Order, ToolError> {
        let orders = self.orders.lock().expect("the shop lock is never poisoned");
        orders.get(order_id).copied().ok_or_else(|| {
            let known = orders.keys().copied().collect::<Vec<_>>().join(", ");
            ToolError::not_found(format!("there is no order {order_id}"))
                .why(format!("the known orders are {known}"))
                .next(format!(
                    "ask the customer for the order id; it is one of {known}"
                ))
        })
    }

    fn refund(&self, order_id: &str, cents: u64) -> Result<Order, ToolError> {
        let mut orders = self.orders.lock().expect("the shop lock is never poisoned");
        let order = orders
            .get_mut(order_id)
            .ok_or_else(|| ToolError::not_found(format!("there is no order {order_id}")))?;
        let refundable = order.paid_cents - order.refunded_cents;
        if cents > refundable {
            return Err(ToolError::refused(format!(
                "a refund of {} exceeds what {order_id} can refund",
                money(cents)
            ))
            .why(format!(
                "paid {}, already refunded {}, so at most {} is refundable",
                money(order.paid_cents),
                money(order.refunded_cents),
                money(refundable)
            ))
            .next(format!("offer a refund of at most {}", money(refundable))));
        }
        order.refunded_cents += cents;
        Ok(*order)
    }
}

/// An order as the model sees it.
#[derive(Debug, Serialize)]
pub(crate) struct OrderView {
    order_id: String,
    paid: String,
    refunded: String,
    refundable: String,
}

/// A refund as the model sees it.
#[derive(Debug, Serialize)]
pub(crate) struct RefundView {
    order_id: String,
    amount: String,
    refunded_total: String,
}

/// Look up an order: what was paid, what was refunded already, and what can still be refunded.
#[tool(permission = "orders:read", timeout = "5s")]
pub(crate) async fn get_order(
    ctx: &Ctx,
    /// The order id, such as `ORD-1001`.
    order_id: String,
) -> Result<OrderView, ToolError> {
    let order = ctx.state::<Shop>()?.order(&order_id)?;
    Ok(OrderView {
        order_id,
        paid: money(order.paid_cents),
        refunded: money(order.refunded_cents),
        refundable: money(order.paid_cents - order.refunded_cents),
    })
}

/// Refund part or all of a paid order. The refund is final.
#[tool(
    side_effect = "write",
    permission = "refund:create",
    approval_over = 5000,
    key = [order_id],
    timeout = "10s",
    retry(max_attempts = 4),
    reconcile = find_refund
)]
pub(crate) async fn issue_refund(
    ctx: &Ctx,
    /// The order to refund, such as `ORD-1001`.
    order_id: String,
    /// The amount to refund, in the order's currency, with at most two decimals.
    #[schemars(extend("exclusiveMinimum" = 0, "multipleOf" = 0.01))]
    amount: f64,
) -> Result<RefundView, ToolError> {
    let cents = to_cents(amount)?;
    let order = ctx.state::<Shop>()?.refund(&order_id, cents)?;
    Ok(RefundView {
        order_id,
        amount: money(cents),
        refunded_total: money(order.refunded_cents),
    })
}

/// Asks the system of record what became of a refund whose outcome is unknown; called with the
/// refund's own arguments.
pub(crate) async fn find_refund(
    ctx: &Ctx,
    order_id: String,
    amount: f64,
) -> Result<Option<RefundView>, ToolError> {
    let _ = amount;
    let order = ctx.state::<Shop>()?.order(&order_id)?;
    Ok((order.refunded_cents > 0).then(|| RefundView {
        order_id,
        amount: money(order.refunded_cents),
        refunded_total: money(order.refunded_cents),
    }))
}

fn to_cents(amount: f64) -> Result<u64, ToolError> {
    let cents = (amount * 100.0).round();
    if !(1.0..=1e15).contains(&cents) {
        return Err(
            ToolError::invalid_arguments(format!("{amount} is not a refundable amount"))
                .next("give an amount above zero with at most two decimals"),
        );
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(cents as u64)
}

/// A registry with the shop's tools.
pub(crate) fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .expect("get_order registers")
        .register::<issue_refund>()
        .expect("issue_refund registers");
    registry
}
