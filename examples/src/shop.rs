//! The demo shop of the refund desk: four orders, the payment provider the tools talk to, and the
//! tools the model may call: `get_order`, `issue_refund` (direct, or through the outbox:
//! [`issue_refund_outbox()`]) and `update_crm_and_notify`.
//!
//! The tools reach the provider through a [`Provider`] in the dispatcher's state. The refund desk
//! gives them an HTTP client of the fake payment provider ([`crate::payments`]); the catalog and
//! the tests that need no network give them [`Shop`], the same provider in memory.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use toolgate::prelude::*;

mod crm;
mod outbox;

pub use crm::{CrmAndNotification, update_crm_and_notify};
pub use outbox::{
    REFUND_REQUESTS_POSTGRES, REFUND_REQUESTS_SQLITE, RefundDelivery, RefundEvent,
    RefundRequestView, issue_refund_outbox,
};

/// What an order id looks like, as the tools' schemas tell the model: `ORD-` and up to ten
/// digits. The dispatcher refuses any other id (`invalid_arguments`) before a tool runs, so no
/// model text but an order id reaches the payment provider's URLs.
pub const ORDER_ID_PATTERN: &str = "^ORD-[0-9]{1,10}$";

/// The longest order id [`ORDER_ID_PATTERN`] admits.
pub const ORDER_ID_MAX_LENGTH: u32 = 14;

/// The shop's orders: id, paid and already refunded, in cents.
pub const ORDERS: [(&str, u64, u64); 4] = [
    ("ORD-1001", 50_000, 0),
    ("ORD-1002", 800_000, 0),
    ("ORD-1003", 12_000, 2_000),
    ("ORD-1004", 7_550, 0),
];

/// "500.00" from 50000.
pub fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// An order as the payment provider knows it, amounts in cents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderState {
    /// The order's id.
    pub order_id: String,
    /// What the customer paid.
    pub paid_cents: u64,
    /// What has been refunded so far.
    pub refunded_cents: u64,
}

impl OrderState {
    /// What can still be refunded.
    pub fn refundable_cents(&self) -> u64 {
        self.paid_cents.saturating_sub(self.refunded_cents)
    }
}

/// A refund the payment provider applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The provider's id for the refund.
    pub refund_id: String,
    /// The refunded order.
    pub order_id: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// A CRM update or a notification the provider applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionReceipt {
    /// The provider's id for it (`crm_000001`, `ntf_000001`).
    pub action_id: String,
    /// The order whose customer it is about.
    pub order_id: String,
}

/// What the tools ask of the payment provider.
#[async_trait::async_trait]
pub trait Payments: Send + Sync + 'static {
    /// The order `order_id`, or `None` when the provider has no such order.
    async fn order(&self, order_id: &str) -> Result<Option<OrderState>, ToolError>;

    /// Refunds `amount_cents` on `order_id` under the idempotency `key`: a key the provider has
    /// seen answers its first refund and applies nothing.
    async fn refund(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: u64,
    ) -> Result<Receipt, ToolError>;

    /// The refund applied under `key`, if any.
    async fn lookup(&self, key: &str) -> Result<Option<Receipt>, ToolError>;

    /// Updates the CRM record of `order_id`'s customer under the idempotency `key`: a key the
    /// provider has seen for a CRM update answers that update and applies nothing.
    async fn crm_update(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError>;

    /// Notifies `order_id`'s customer under the idempotency `key`, as [`Payments::crm_update`].
    async fn notify(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError>;
}

/// The payment provider the tools use: put one in the dispatcher's state.
#[derive(Clone)]
pub struct Provider(pub Arc<dyn Payments>);

impl Provider {
    /// The provider `payments`, ready to go in a dispatcher's state (`DispatcherBuilder::state`).
    pub fn new(payments: impl Payments) -> Self {
        Provider(Arc::new(payments))
    }
}

/// The error for an order id the shop does not have; lists the ones it has.
pub fn unknown_order(order_id: &str) -> ToolError {
    let known = ORDERS.map(|(id, _, _)| id).join(", ");
    ToolError::not_found(format!("there is no order {order_id}"))
        .with_why(format!("the known orders are {known}"))
        .with_next(format!(
            "ask the customer for the order id; it is one of {known}"
        ))
}

/// The error for a refund larger than what `order` can still refund.
pub fn over_balance(order: &OrderState, amount_cents: u64) -> ToolError {
    let refundable = money(order.refundable_cents());
    ToolError::refused(format!(
        "a refund of {} exceeds what {} can refund",
        money(amount_cents),
        order.order_id
    ))
    .with_why(format!(
        "paid {}, already refunded {}, so at most {refundable} is refundable",
        money(order.paid_cents),
        money(order.refunded_cents),
    ))
    .with_next(format!("offer a refund of at most {refundable}"))
}

/// The payment provider in memory, honouring idempotency keys: for unit tests and the catalog.
#[derive(Debug)]
pub struct Shop {
    inner: Mutex<ShopState>,
}

#[derive(Debug)]
struct ShopState {
    orders: BTreeMap<&'static str, OrderState>,
    receipts: BTreeMap<String, Receipt>,
    /// CRM updates and notifications by (`crm` or `ntf`, key).
    actions: BTreeMap<(&'static str, String), ActionReceipt>,
}

impl Default for Shop {
    fn default() -> Self {
        let orders = ORDERS
            .into_iter()
            .map(|(id, paid_cents, refunded_cents)| {
                let order = OrderState {
                    order_id: id.to_owned(),
                    paid_cents,
                    refunded_cents,
                };
                (id, order)
            })
            .collect();
        Shop {
            inner: Mutex::new(ShopState {
                orders,
                receipts: BTreeMap::new(),
                actions: BTreeMap::new(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl Payments for Shop {
    async fn order(&self, order_id: &str) -> Result<Option<OrderState>, ToolError> {
        let shop = self.inner.lock().expect("the shop lock is never poisoned");
        Ok(shop.orders.get(order_id).cloned())
    }

    async fn refund(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: u64,
    ) -> Result<Receipt, ToolError> {
        let mut shop = self.inner.lock().expect("the shop lock is never poisoned");
        if let Some(receipt) = shop.receipts.get(key) {
            return Ok(receipt.clone());
        }
        let refund_id = format!("re_{:06}", shop.receipts.len() + 1);
        let order = shop
            .orders
            .get_mut(order_id)
            .ok_or_else(|| unknown_order(order_id))?;
        if amount_cents > order.refundable_cents() {
            return Err(over_balance(order, amount_cents));
        }
        order.refunded_cents += amount_cents;
        let receipt = Receipt {
            refund_id,
            order_id: order_id.to_owned(),
            amount_cents,
        };
        shop.receipts.insert(key.to_owned(), receipt.clone());
        Ok(receipt)
    }

    async fn lookup(&self, key: &str) -> Result<Option<Receipt>, ToolError> {
        let shop = self.inner.lock().expect("the shop lock is never poisoned");
        Ok(shop.receipts.get(key).cloned())
    }

    async fn crm_update(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
        self.act("crm", key, order_id)
    }

    async fn notify(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
        self.act("ntf", key, order_id)
    }
}

impl Shop {
    /// An action of kind `prefix` under `key`, applied once per key.
    fn act(
        &self,
        prefix: &'static str,
        key: &str,
        order_id: &str,
    ) -> Result<ActionReceipt, ToolError> {
        let mut shop = self.inner.lock().expect("the shop lock is never poisoned");
        if !shop.orders.contains_key(order_id) {
            return Err(unknown_order(order_id));
        }
        let number = shop
            .actions
            .keys()
            .filter(|(kind, _)| *kind == prefix)
            .count()
            + 1;
        let receipt = shop
            .actions
            .entry((prefix, key.to_owned()))
            .or_insert_with(|| ActionReceipt {
                action_id: format!("{prefix}_{number:06}"),
                order_id: order_id.to_owned(),
            });
        Ok(receipt.clone())
    }
}

/// An order as the model sees it.
#[derive(Debug, Serialize)]
pub struct OrderView {
    order_id: String,
    paid: String,
    refunded: String,
    refundable: String,
}

/// A refund as the model sees it.
#[derive(Debug, Serialize)]
pub struct RefundView {
    refund_id: String,
    order_id: String,
    amount: String,
}

impl From<Receipt> for RefundView {
    fn from(receipt: Receipt) -> Self {
        RefundView {
            refund_id: receipt.refund_id,
            order_id: receipt.order_id,
            amount: money(receipt.amount_cents),
        }
    }
}

fn payments(ctx: &Ctx) -> Result<&dyn Payments, ToolError> {
    Ok(&*ctx.state::<Provider>()?.0)
}

/// Look up an order: what was paid, what was refunded already, and what can still be refunded.
#[tool(permission = "orders:read", timeout = "1s", rate_limit = "5/min")]
pub async fn get_order(
    ctx: &Ctx,
    /// The order id, such as `ORD-1001`.
    #[schemars(pattern(ORDER_ID_PATTERN), length(max = ORDER_ID_MAX_LENGTH))]
    order_id: String,
) -> Result<OrderView, ToolError> {
    let order = payments(ctx)?
        .order(&order_id)
        .await?
        .ok_or_else(|| unknown_order(&order_id))?;
    Ok(OrderView {
        paid: money(order.paid_cents),
        refunded: money(order.refunded_cents),
        refundable: money(order.refundable_cents()),
        order_id,
    })
}

/// Refund part or all of a paid order. The refund is final.
#[tool(
    side_effect = "write",
    permission = "refund:create",
    approval_over = 5000,
    key = [order_id],
    resource = order_id,
    timeout = "10s",
    retry(max_attempts = 4),
    reconcile = find_refund(ctx, key),
    approver = "refund:approve",
    check = within_balance(ctx, order_id, amount)
)]
pub async fn issue_refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    /// The order to refund, such as `ORD-1001`.
    #[schemars(pattern(ORDER_ID_PATTERN), length(max = ORDER_ID_MAX_LENGTH))]
    order_id: String,
    /// The amount to refund, in the order's currency, with at most two decimals.
    #[schemars(extend("exclusiveMinimum" = 0, "multipleOf" = 0.01))]
    amount: f64,
) -> Result<RefundView, ToolError> {
    let cents = to_cents(amount)?;
    // `within_balance` checked the amount before the call was claimed; the provider checks it
    // again, against the order as it is when the refund is applied.
    Ok(payments(ctx)?.refund(key, &order_id, cents).await?.into())
}

/// The refund's business check: the amount is at most what the order can still refund (paid
/// minus refunded). An unknown order is `not_found`, an amount over the balance `refused`; the
/// dispatcher runs it before the refund is claimed, and again before an approved refund runs.
pub async fn within_balance(ctx: &Ctx, order_id: String, amount: f64) -> Result<(), ToolError> {
    let cents = to_cents(amount)?;
    let order = payments(ctx)?
        .order(&order_id)
        .await?
        .ok_or_else(|| unknown_order(&order_id))?;
    if cents > order.refundable_cents() {
        return Err(over_balance(&order, cents));
    }
    Ok(())
}

/// Asks the payment provider for the refund under the operation's key, for a refund whose outcome
/// is unknown; called with the refund's context and key.
pub async fn find_refund(ctx: &Ctx, key: &IdempotencyKey) -> Result<Option<RefundView>, ToolError> {
    let receipt = payments(ctx)?.lookup(key).await?;
    Ok(receipt.map(RefundView::from))
}

fn to_cents(amount: f64) -> Result<u64, ToolError> {
    let cents = (amount * 100.0).round();
    if !(1.0..=1e15).contains(&cents) {
        // Huge amounts in exponent form, not three hundred digits.
        let shown = if amount.abs() < 1e15 {
            amount.to_string()
        } else {
            format!("{amount:e}")
        };
        return Err(
            ToolError::invalid_arguments(format!("{shown} is not a refundable amount"))
                .with_next("give an amount above zero with at most two decimals"),
        );
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(cents as u64)
}

/// A registry with the shop's tools: `get_order`, `issue_refund` (calling the provider while
/// the model waits) and `update_crm_and_notify`.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .expect("get_order registers")
        .register::<issue_refund>()
        .expect("issue_refund registers")
        .register::<update_crm_and_notify>()
        .expect("update_crm_and_notify registers");
    registry
}

/// [`registry`] with `issue_refund` delivered through the outbox ([`issue_refund_outbox()`]): the
/// same wire name, schema, permission, approval, key, check and reconcile.
pub fn outbox_registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .expect("get_order registers")
        .register::<issue_refund_outbox>()
        .expect("issue_refund registers")
        .register::<update_crm_and_notify>()
        .expect("update_crm_and_notify registers");
    registry
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use toolgate::Tool;

    use super::*;

    /// Runs the refund's business check on the amount given, with this call's context (and so
    /// the shop in its state), the way the dispatcher calls `Tool::check`.
    #[tool]
    async fn check_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
        let args = json!({"order_id": order_id, "amount": amount});
        let check = Tool::check(&issue_refund {}, ctx, &args).expect("issue_refund has a check");
        Ok(match check.await {
            Ok(()) => json!("passed"),
            Err(err) => json!({"kind": err.kind().as_str(), "what": err.what()}),
        })
    }

    #[tokio::test]
    async fn the_refund_check_refuses_more_than_the_order_can_refund() {
        let mut registry = Registry::new();
        registry.register::<check_refund>().unwrap();
        let dispatcher = Dispatcher::builder(registry)
            .state(Provider::new(Shop::default()))
            .build();
        let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
        let check = |id: &str, order_id: &str, amount: f64| {
            ToolCall::new(
                id,
                "check_refund",
                json!({"order_id": order_id, "amount": amount}),
            )
        };
        // ORD-1003: paid 120.00, refunded 20.00, so 100.00 is refundable.
        let calls = vec![
            check("1", "ORD-1003", 100.0),
            check("2", "ORD-1003", 100.01),
            check("3", "ORD-9999", 1.0),
        ];
        let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
        let data: Vec<Value> = reports
            .iter()
            .map(|r| r.result.to_json()["data"].clone())
            .collect();
        assert_eq!(data[0], json!("passed"));
        assert_eq!(
            data[1],
            json!({"kind": "refused", "what": "a refund of 100.01 exceeds what ORD-1003 can refund"})
        );
        assert_eq!(
            data[2],
            json!({"kind": "not_found", "what": "there is no order ORD-9999"})
        );
        assert_eq!(
            issue_refund::descriptor()
                .approval
                .unwrap()
                .approver_permission("issue_refund"),
            "refund:approve"
        );
        assert_eq!(issue_refund::descriptor().check, Some("within_balance"));
    }
}
