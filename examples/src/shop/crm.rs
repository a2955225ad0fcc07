//! `update_crm_and_notify`: a write in two steps, each journaled under its operation.

use serde::Serialize;
use toolgate::prelude::*;

use super::{ORDER_ID_MAX_LENGTH, ORDER_ID_PATTERN, payments};

/// What the model reads once both steps are done.
#[derive(Debug, Serialize)]
pub struct CrmAndNotification {
    /// The order whose customer was updated and notified.
    order_id: String,
    /// The provider's id of the CRM update.
    crm_update: String,
    /// The provider's id of the notification.
    notification: String,
}

/// Record the order's outcome in the customer's CRM record, then send the customer a
/// notification about it. Two steps, in this order: `update_crm`, then `notify`. When the update
/// succeeds and the notification fails, the call answers `partial`, naming the step that
/// succeeded and the one that failed; calling it again with the same order runs only the steps
/// not done (the notification), never the CRM update a second time.
#[tool(
    side_effect = "write",
    permission = "crm:write",
    key = [order_id],
    resource = order_id,
    timeout = "10s",
    // A failed notification is answered at once (`partial`): the model decides whether to ask
    // again, and the call again runs only what is left.
    retry(max_attempts = 1)
)]
pub async fn update_crm_and_notify(
    ctx: &Ctx,
    key: &IdempotencyKey,
    /// The order whose customer to update and notify, such as `ORD-1001`.
    #[schemars(pattern(ORDER_ID_PATTERN), length(max = ORDER_ID_MAX_LENGTH))]
    order_id: String,
) -> Result<CrmAndNotification, ToolError> {
    let provider = payments(ctx)?;
    let crm = ctx
        .step("update_crm", provider.crm_update(key, &order_id))
        .await?;
    let notification = ctx.step("notify", provider.notify(key, &order_id)).await?;
    Ok(CrmAndNotification {
        order_id,
        crm_update: crm.action_id,
        notification: notification.action_id,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use serde_json::{Value, json};
    use toolgate_test::MemoryStore;

    use super::*;
    use crate::shop::{ActionReceipt, OrderState, Payments, Provider, Receipt, Shop};

    /// The shop in memory, counting CRM updates and notifications asked for, whose first
    /// `failing` notifications answer 503.
    struct Flaky {
        shop: Shop,
        crm: AtomicU32,
        notify: AtomicU32,
        failing: u32,
    }

    #[async_trait::async_trait]
    impl Payments for Arc<Flaky> {
        async fn order(&self, order_id: &str) -> Result<Option<OrderState>, ToolError> {
            self.shop.order(order_id).await
        }

        async fn refund(
            &self,
            key: &str,
            order_id: &str,
            cents: u64,
        ) -> Result<Receipt, ToolError> {
            self.shop.refund(key, order_id, cents).await
        }

        async fn lookup(&self, key: &str) -> Result<Option<Receipt>, ToolError> {
            self.shop.lookup(key).await
        }

        async fn crm_update(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
            self.crm.fetch_add(1, Ordering::SeqCst);
            self.shop.crm_update(key, order_id).await
        }

        async fn notify(&self, key: &str, order_id: &str) -> Result<ActionReceipt, ToolError> {
            if self.notify.fetch_add(1, Ordering::SeqCst) < self.failing {
                return Err(ToolError::unavailable(
                    "the notification service answered 503",
                ));
            }
            self.shop.notify(key, order_id).await
        }
    }

    #[tokio::test]
    async fn a_failed_notification_is_partial_and_the_call_again_runs_only_the_notification() {
        let flaky = Arc::new(Flaky {
            shop: Shop::default(),
            crm: AtomicU32::new(0),
            notify: AtomicU32::new(0),
            failing: 2,
        });
        let mut registry = Registry::new();
        registry.register::<update_crm_and_notify>().unwrap();
        let dispatcher = Dispatcher::builder(registry)
            .store(MemoryStore::new())
            .state(Provider::new(flaky.clone()))
            .build();
        let auth = AuthContext::new("acme", "agent").with_permissions(["crm:write"]);
        let session = Session::new(auth, "run-1");
        let call =
            |id: &str| ToolCall::new(id, "update_crm_and_notify", json!({"order_id": "ORD-1003"}));
        let mut answers: Vec<Value> = Vec::new();
        for id in ["1", "2", "3", "4"] {
            let reports = dispatcher
                .dispatch_turn(&session, vec![call(id)])
                .await
                .unwrap();
            answers.push(reports[0].result.to_json());
        }
        let statuses: Vec<&str> = answers
            .iter()
            .map(|a| a["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            ["partial", "partial", "succeeded", "succeeded"],
            "{answers:#?}"
        );
        assert_eq!(answers[0]["steps"][0]["name"], "update_crm");
        assert_eq!(answers[0]["steps"][0]["status"], "succeeded");
        assert_eq!(answers[0]["steps"][1]["name"], "notify");
        assert_eq!(answers[0]["steps"][1]["status"], "failed");
        assert_eq!(answers[1]["steps"][0]["replayed"], true, "{answers:#?}");
        assert_eq!(
            answers[2]["data"],
            json!({"order_id": "ORD-1003", "crm_update": "crm_000001", "notification": "ntf_000001"})
        );
        assert_eq!(
            flaky.crm.load(Ordering::SeqCst),
            1,
            "the CRM is updated once in four calls"
        );
        assert_eq!(flaky.notify.load(Ordering::SeqCst), 3);
    }
}
