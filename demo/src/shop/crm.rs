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
    let notification = ctx
        .step("notify", provider.notify(key, &order_id))
        .await?;
    Ok(CrmAndNotification {
        order_id,
        crm_update: crm.action_id,
        notification: notification.action_id,
    })
}
