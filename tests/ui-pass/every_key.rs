//! Every key of the attribute at once.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::{tool::{KeyScope, RateLimit, RetrySpec}};

mod payments {
    /// Asks the payment provider what became of a refund.
    use toolgate::prelude::*;

    /// Asks the payment provider whether the refund under the operation's key exists.
    pub async fn find_refund(
        ctx: &Ctx,
        order_id: String,
        total: f64,
    ) -> Result<Option<String>, ToolError> {
        let _ = (ctx.idempotency_key(), order_id, total);
        Ok(None)
    }

    /// Refuses a refund over what the tenant may refund in one go.
    pub async fn within_limit(total: f64, ctx: &Ctx) -> Result<(), ToolError> {
        if total > 1_000_000.0 {
            return Err(ToolError::refused(format!(
                "{} refunds at most 1000000 at once",
                ctx.auth().tenant()
            )));
        }
        Ok(())
    }
}

/// Refund part or all of a paid order. The refund is final.
#[tool(
    side_effect = "destructive",
    name = "issue-refund",
    permission = "refund:create",
    approval_over = 5000.5,
    approval_field = total,
    key = [order_id, total],
    key_scope = "tenant",
    timeout = "10s",
    retry(max_attempts = 4, base = "100ms", max = "5s", jitter = false),
    rate_limit = "20/min",
    reconcile = payments::find_refund,
    resource = order_id,
    approver = "refund:approve",
    approval_ttl = "30min",
    check = payments::within_limit(total, ctx),
)]
async fn issue_refund(ctx: &Ctx, order_id: String, total: f64) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "total": total, "run": ctx.run_id()}))
}

fn main() {
    let d = issue_refund::descriptor();
    assert_eq!(d.name, "issue-refund");
    assert_eq!(d.side_effect, SideEffect::Destructive);
    assert_eq!(d.permission, Some("refund:create"));
    assert_eq!(
        d.approval.map(|a| (a.over, a.field)),
        Some((5000.5, "total"))
    );
    assert_eq!(d.key, &["order_id", "total"]);
    assert_eq!(d.key_scope, KeyScope::Tenant);
    assert_eq!(d.timeout, Some(Duration::from_secs(10)));
    assert_eq!(
        d.retry,
        RetrySpec {
            max_attempts: Some(4),
            base: Some(Duration::from_millis(100)),
            max: Some(Duration::from_secs(5)),
            jitter: Some(false),
        }
    );
    assert_eq!(
        d.rate_limit,
        Some(RateLimit::new(20, Duration::from_secs(60)))
    );
    assert_eq!(d.reconcile, Some("payments::find_refund"));
    assert_eq!(d.resource, Some("order_id"));
    let approval = d.approval.unwrap();
    assert_eq!(approval.approver, Some("refund:approve"));
    assert_eq!(approval.ttl, Some(Duration::from_secs(30 * 60)));
    assert_eq!(d.check, Some("payments::within_limit"));
}
