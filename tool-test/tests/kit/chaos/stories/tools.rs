//! One `refund` tool in three versions, each reaching the provider through the fault proxy:
//! `right` passes the operation's key as `Idempotency-Key` and its reconcile hook asks the
//! provider for the refund under that key; `keyless` is the same but sends no key; `guessing`
//! passes the key, and its reconcile hook answers "not applied" without asking. A fourth,
//! `approved`, is `right` with an amount that needs an approval over 100; `queued` records its
//! refund for the outbox, which the worker delivers under the operation's key, and
//! `queued_unhooked` is the same without a reconcile hook.

use std::net::SocketAddr;

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use toolgate::prelude::*;

use super::super::client::{Outcome, request, send};

/// Where the refund tools send their requests: the fault proxy's address.
pub(crate) struct PaymentsUrl(pub(crate) SocketAddr);

/// Posts a refund of `order_id`, under `key` when there is one.
async fn post_refund(ctx: &Ctx, key: Option<&str>, order_id: &str) -> Result<Value, ToolError> {
    let PaymentsUrl(addr) = ctx.state::<PaymentsUrl>()?;
    post_refund_to(*addr, key, order_id).await
}

/// Posts a refund of `order_id` to the provider at `addr`, under `key` when there is one.
pub(crate) async fn post_refund_to(
    addr: SocketAddr,
    key: Option<&str>,
    order_id: &str,
) -> Result<Value, ToolError> {
    let body = json!({"order_id": order_id}).to_string();
    let mut refund = request(Method::POST, "/refunds", key, &body);
    refund
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // No deadline of the client's own: the tool's timeout drops this future, and the
    // connection with it.
    match send(addr, refund, None).await {
        Outcome::Answered(answer) if answer.status() == StatusCode::OK => json_of(answer.body()),
        Outcome::Answered(answer) if answer.status() == StatusCode::SERVICE_UNAVAILABLE => {
            Err(ToolError::unavailable("the payment provider answered 503"))
        }
        Outcome::Answered(answer) => Err(ToolError::internal(format!(
            "the payment provider answered {}",
            answer.status()
        ))),
        Outcome::Broke(err) => {
            Err(ToolError::outcome_unknown("the connection broke").with_why(err.to_string()))
        }
        Outcome::TimedOut => unreachable!("the tool sets no deadline of its own"),
    }
}

/// Asks the provider for the refund applied under `key`.
async fn find_refund(ctx: &Ctx, key: &str) -> Result<Option<Value>, ToolError> {
    let PaymentsUrl(addr) = ctx.state::<PaymentsUrl>()?;
    let lookup = request(Method::GET, &format!("/refunds?key={key}"), None, "");
    match send(*addr, lookup, None).await {
        Outcome::Answered(answer) if answer.status() == StatusCode::OK => {
            json_of(answer.body()).map(Some)
        }
        Outcome::Answered(answer) if answer.status() == StatusCode::NOT_FOUND => Ok(None),
        other => Err(ToolError::unavailable(format!(
            "the refund lookup failed: {other:?}"
        ))),
    }
}

fn json_of(body: &[u8]) -> Result<Value, ToolError> {
    serde_json::from_slice(body).map_err(|err| {
        ToolError::internal("the provider's answer is not JSON").with_why(err.to_string())
    })
}

/// The refund tool done right.
pub(crate) mod right {
    use super::*;

    /// Refund an order at the payment provider.
    #[tool(
        side_effect = "write",
        key = [order_id],
        timeout = "1s",
        retry(max_attempts = 3, base = "1ms", max = "2ms"),
        reconcile = lookup(ctx, key)
    )]
    pub(crate) async fn refund(
        ctx: &Ctx,
        key: &IdempotencyKey,
        order_id: String,
    ) -> Result<Value, ToolError> {
        post_refund(ctx, Some(key), &order_id).await
    }

    /// Asks the provider for the refund under the operation's key.
    pub(crate) async fn lookup(
        ctx: &Ctx,
        key: &IdempotencyKey,
    ) -> Result<Option<Value>, ToolError> {
        find_refund(ctx, key).await
    }
}

/// The refund tool delivered through the outbox: it records the refund and its event, and the
/// application's worker (`worker` in the stories) posts it to the provider under the
/// operation's key. A delivery whose answer is lost is settled by its reconcile hook.
pub(crate) mod queued {
    use super::*;

    /// Refund an order at the payment provider, delivered by the application's worker.
    #[tool(
        side_effect = "write",
        delivery = "outbox",
        key = [order_id],
        reconcile = lookup(ctx, key)
    )]
    pub(crate) async fn refund(
        ctx: &Ctx,
        key: &IdempotencyKey,
        order_id: String,
    ) -> Result<Value, ToolError> {
        // The worker sends the event under the operation's key; the hook asks for it.
        let _sent_by_the_worker = key;
        ctx.enqueue(&json!({"order_id": order_id}))?;
        Ok(json!({"order_id": order_id}))
    }

    /// Asks the provider for the refund under the operation's key.
    pub(crate) async fn lookup(
        ctx: &Ctx,
        key: &IdempotencyKey,
    ) -> Result<Option<Value>, ToolError> {
        find_refund(ctx, key).await
    }
}

/// `queued` without a reconcile hook: a delivery whose answer is lost stays unknown.
pub(crate) mod queued_unhooked {
    use super::*;

    /// Refund an order at the payment provider, delivered by the application's worker.
    #[tool(side_effect = "write", delivery = "outbox", key = [order_id])]
    pub(crate) async fn refund(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
        ctx.enqueue(&json!({"order_id": order_id}))?;
        Ok(json!({"order_id": order_id}))
    }
}

/// The refund tool that does not pass the operation's key to the provider.
pub(crate) mod keyless {
    use super::*;

    /// Refund an order at the payment provider.
    #[tool(
        side_effect = "write",
        key = [order_id],
        timeout = "1s",
        retry(max_attempts = 3, base = "1ms", max = "2ms"),
        reconcile = lookup(ctx, key)
    )]
    pub(crate) async fn refund(
        ctx: &Ctx,
        key: &IdempotencyKey,
        order_id: String,
    ) -> Result<Value, ToolError> {
        let _forgotten = key;
        post_refund(ctx, None, &order_id).await
    }

    /// Asks the provider for the refund under the operation's key.
    pub(crate) async fn lookup(
        ctx: &Ctx,
        key: &IdempotencyKey,
    ) -> Result<Option<Value>, ToolError> {
        find_refund(ctx, key).await
    }
}

/// The refund tool whose reconcile hook answers without asking.
pub(crate) mod guessing {
    use super::*;

    /// Refund an order at the payment provider.
    #[tool(
        side_effect = "write",
        key = [order_id],
        timeout = "1s",
        retry(max_attempts = 3, base = "1ms", max = "2ms"),
        reconcile = not_applied(key)
    )]
    pub(crate) async fn refund(
        ctx: &Ctx,
        key: &IdempotencyKey,
        order_id: String,
    ) -> Result<Value, ToolError> {
        post_refund(ctx, Some(key), &order_id).await
    }

    /// Answers "not applied" without asking the provider.
    pub(crate) async fn not_applied(key: &IdempotencyKey) -> Result<Option<Value>, ToolError> {
        let _unasked = key;
        Ok(None)
    }
}

/// The refund tool done right, with an amount: over 100 it waits for an approver holding
/// `refund:approve`.
pub(crate) mod approved {
    use super::*;

    /// Refund an amount of an order at the payment provider.
    #[tool(
        side_effect = "write",
        key = [order_id],
        approval_over = 100,
        approver = "refund:approve",
        timeout = "1s",
        retry(max_attempts = 3, base = "1ms", max = "2ms"),
        reconcile = lookup(ctx, key)
    )]
    pub(crate) async fn refund(
        ctx: &Ctx,
        key: &IdempotencyKey,
        order_id: String,
        amount: u32,
    ) -> Result<Value, ToolError> {
        let _amount = amount;
        post_refund(ctx, Some(key), &order_id).await
    }

    /// Asks the provider for the refund under the operation's key.
    pub(crate) async fn lookup(
        ctx: &Ctx,
        key: &IdempotencyKey,
    ) -> Result<Option<Value>, ToolError> {
        find_refund(ctx, key).await
    }
}
