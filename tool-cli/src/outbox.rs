//! `outbox list | show | resume`: the events of outbox operations, and an operator's resume of
//! a dead one.

use serde_json::{Value, json};
use toolgate_core::identity::Operator;
use toolgate_core::store::{EventQuery, EventStatus, OperationStore, OutboxEvent, ResumeRequest};

use crate::error::Failure;
use crate::identity;
use crate::json::{document, stored};
use crate::operator_audit::{self, Action};
use crate::ops::only_one;
use crate::table::{Table, or_dash};
use crate::time::{now_ms, rfc3339};

/// The permission an operator needs to resume a dead event.
pub(crate) const RESUME_PERMISSION: &str = "outbox:resume";

/// `outbox list`: the events in `status` (every status for `None`), of `tenant` or of every
/// tenant, oldest first, at most `limit` (0: all).
pub(crate) async fn list(
    store: &dyn OperationStore,
    status: Option<EventStatus>,
    tenant: Option<&str>,
    limit: u32,
    json: bool,
) -> Result<String, Failure> {
    let query = EventQuery {
        tenant,
        status,
        limit,
    };
    let events = store
        .list_events(query)
        .await
        .map_err(|e| Failure::store("list the outbox events", &e))?;
    if json {
        return Ok(document(&Value::Array(
            events.iter().map(event_json).collect(),
        )));
    }
    if events.is_empty() {
        let which = status.map_or(String::new(), |s| format!("{} ", s.as_str()));
        let of = tenant
            .map(|t| format!(" of tenant {t}"))
            .unwrap_or_default();
        return Ok(format!("no {which}outbox events{of}\n"));
    }
    let mut table = Table::new(&[
        "TENANT",
        "KEY",
        "TOOL",
        "STATUS",
        "ATTEMPT",
        "DUE",
        "UPDATED",
        "LAST ERROR",
    ]);
    for e in &events {
        table.row(vec![
            e.tenant.clone(),
            e.key.clone(),
            e.tool.clone(),
            e.status.as_str().to_owned(),
            e.attempt.to_string(),
            rfc3339(e.due_ms),
            rfc3339(e.updated_ms),
            or_dash(
                e.last_error
                    .as_ref()
                    .map(|err| format!("{}: {}", err.kind, err.what))
                    .as_deref(),
            ),
        ]);
    }
    Ok(table.render())
}

/// `outbox show KEY`: the event of the operation `key` in `tenant`, or, without a tenant, in the
/// one tenant that holds the key.
pub(crate) async fn show(
    store: &dyn OperationStore,
    key: &str,
    tenant: Option<&str>,
    json: bool,
) -> Result<String, Failure> {
    let event = match tenant {
        Some(tenant) => store
            .event(tenant, key)
            .await
            .map_err(|e| Failure::store(&format!("read the outbox event {key}"), &e))?,
        None => only_holder(store, key).await?,
    };
    let event = event.ok_or_else(|| not_found(key, tenant))?;
    if json {
        return Ok(document(&event_json(&event)));
    }
    Ok(describe(&event))
}

/// What an operator resumes: the dead event of the operation `key`, for `reason`; printed as
/// JSON with `json`.
pub(crate) struct Resume<'a> {
    pub(crate) key: &'a str,
    pub(crate) reason: Option<&'a str>,
    pub(crate) json: bool,
}

/// `outbox resume KEY`, as `operator`: a dead event of the operator's tenant is pending again,
/// due now, with its delivery budget counted afresh. The action, or the refusal of it, appends
/// an audit record (kind `operator`).
pub(crate) async fn resume(
    store: &dyn OperationStore,
    args: &Resume<'_>,
    operator: &Operator,
) -> Result<String, Failure> {
    let done = resume_event(store, args, operator).await;
    let (outcome, reason, tool) = match &done {
        Ok((_, tool)) => ("resumed", args.reason.map(str::to_owned), tool.clone()),
        Err(Failure::Refused(refusal)) => (
            "refused",
            Some(format!("{}: {}", refusal.what, refusal.why)),
            String::new(),
        ),
        // The store failed: it takes no record either.
        Err(_) => return done.map(|(text, _)| text),
    };
    let action = Action {
        command: "outbox resume",
        operator,
        key: args.key,
        tool,
        outcome,
        reason: match reason {
            Some(reason) => format!("outbox resume: {reason}"),
            None => "outbox resume".to_owned(),
        },
    };
    operator_audit::record(store, action).await?;
    done.map(|(text, _)| text)
}

/// The resume itself: what to print, and the event's tool.
async fn resume_event(
    store: &dyn OperationStore,
    args: &Resume<'_>,
    operator: &Operator,
) -> Result<(String, String), Failure> {
    let key = args.key;
    let tenant = operator.tenant();
    identity::operator_may(
        operator,
        RESUME_PERMISSION,
        "resume",
        &format!("the outbox event {key}"),
    )?;
    let before = store
        .event(tenant, key)
        .await
        .map_err(|e| Failure::store(&format!("read the outbox event {key}"), &e))?
        .ok_or_else(|| not_found(key, Some(tenant)))?;
    if before.status != EventStatus::Dead {
        return Err(not_dead(&before));
    }
    let after = store
        .resume_event(ResumeRequest {
            tenant,
            key,
            now_ms: now_ms(),
        })
        .await
        .map_err(|e| Failure::store(&format!("resume the outbox event {key}"), &e))?
        .ok_or_else(|| not_found(key, Some(tenant)))?;
    if after.status != EventStatus::Pending {
        // It changed between the read and the resume (another operator resumed it first).
        return Err(not_dead(&after));
    }
    if args.json {
        return Ok((document(&event_json(&after)), after.tool));
    }
    let reason = args.reason.map(|r| format!(" ({r})")).unwrap_or_default();
    let text = format!(
        "outbox event {key} of tenant {tenant} resumed by {}{reason}: pending, due now; the next \
         worker pass delivers it, with a full delivery budget again\n{}",
        operator.subject(),
        describe(&after)
    );
    Ok((text, after.tool))
}

fn not_found(key: &str, tenant: Option<&str>) -> Failure {
    let of = tenant
        .map(|t| format!(" of tenant {t}"))
        .unwrap_or_default();
    Failure::refused(
        format!("no outbox event {key}{of}"),
        format!("no operation{of} in this store has an outbox event under this key"),
        "list the events with `toolgate outbox list`",
    )
}

fn not_dead(event: &OutboxEvent) -> Failure {
    let status = event.status.as_str();
    let next = match event.status {
        EventStatus::Pending | EventStatus::Leased => {
            "nothing to do: a worker delivers it; check again with `toolgate outbox show`"
        }
        EventStatus::Delivered => "nothing to do: the provider applied it",
        EventStatus::Unknown => {
            "a delivery of it may have been applied, so delivering it again could apply it twice: \
             the reconciler asks the provider and settles it (applied: succeeded; not applied: \
             pending again); follow it with `toolgate ops show`"
        }
        _ => "a resume applies to dead events only; check it with `toolgate outbox show`",
    };
    Failure::refused(
        format!("the outbox event {} is {status}, not dead", event.key),
        "only a dead event is resumed",
        next,
    )
}

/// The one event of any tenant under `key`; several are a usage error that names the tenants.
async fn only_holder(
    store: &dyn OperationStore,
    key: &str,
) -> Result<Option<OutboxEvent>, Failure> {
    let holders: Vec<OutboxEvent> = store
        .list_events(EventQuery::default())
        .await
        .map_err(|e| Failure::store(&format!("read the outbox event {key}"), &e))?
        .into_iter()
        .filter(|e| e.key == key)
        .collect();
    only_one(holders, key, |e| &e.tenant)
}

/// Every field of `event` as text, one a line.
fn describe(e: &OutboxEvent) -> String {
    let error = e
        .last_error
        .as_ref()
        .map(|err| format!("attempt {}, {}: {}", err.attempt, err.kind, err.what));
    let fields = [
        ("key", e.key.clone()),
        ("tenant", e.tenant.clone()),
        ("tool", e.tool.clone()),
        ("status", e.status.as_str().to_owned()),
        ("attempt", e.attempt.to_string()),
        ("resumed at", e.resumed_at.to_string()),
        ("payload", e.payload.clone()),
        ("due", rfc3339(e.due_ms)),
        ("worker", or_dash(e.worker.as_deref())),
        ("last error", or_dash(error.as_deref())),
        ("result", or_dash(e.result.as_deref())),
        ("applied", applied(e).to_owned()),
        ("created", rfc3339(e.created_ms)),
        ("updated", rfc3339(e.updated_ms)),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&format!("{name:<12} {value}\n"));
    }
    if e.status == EventStatus::Leased {
        out.push_str(&format!(
            "{:<12} {}\n",
            "lease until",
            rfc3339(e.lease_until_ms)
        ));
    }
    out
}

/// Whether the provider applied `e`, as far as the store knows.
fn applied(e: &OutboxEvent) -> &'static str {
    match e.status {
        EventStatus::Delivered => "yes",
        EventStatus::Unknown => "maybe: the reconciler asks the provider",
        _ if e.maybe_applied => {
            "maybe: a delivery's answer was lost, or its worker stopped mid-delivery"
        }
        _ => "no",
    }
}

/// `event` as JSON: every field, times both as milliseconds and as RFC 3339.
fn event_json(e: &OutboxEvent) -> Value {
    json!({
        "tenant": e.tenant,
        "key": e.key,
        "tool": e.tool,
        "status": e.status.as_str(),
        "attempt": e.attempt,
        "resumed_at": e.resumed_at,
        "attempts_spent": e.attempts_spent(),
        "payload": stored(&e.payload),
        "due_ms": e.due_ms,
        "due_at": rfc3339(e.due_ms),
        "lease_until_ms": e.lease_until_ms,
        "worker": e.worker,
        "last_error": e.last_error.as_ref().map(|err| json!({
            "attempt": err.attempt,
            "kind": err.kind,
            "what": err.what,
        })),
        "result": e.result.as_deref().map(stored),
        "maybe_applied": e.maybe_applied,
        "created_ms": e.created_ms,
        "created_at": rfc3339(e.created_ms),
        "updated_ms": e.updated_ms,
        "updated_at": rfc3339(e.updated_ms),
    })
}

#[cfg(test)]
mod tests {
    use toolgate_core::store::AttemptError;

    use super::*;

    fn event() -> OutboxEvent {
        OutboxEvent {
            tenant: "acme".into(),
            key: "k1".into(),
            tool: "issue_refund".into(),
            payload: r#"{"order_id":"ORD-1001","amount_cents":5000}"#.into(),
            status: EventStatus::Dead,
            attempt: 3,
            resumed_at: 0,
            lease_until_ms: 0,
            due_ms: 60_000,
            worker: Some("w1".into()),
            last_error: Some(AttemptError {
                attempt: 3,
                kind: "unavailable".into(),
                what: "503".into(),
            }),
            result: None,
            maybe_applied: false,
            created_ms: 0,
            updated_ms: 60_000,
        }
    }

    #[test]
    fn show_names_every_field_and_json_embeds_the_payload() {
        let text = describe(&event());
        for expected in [
            "key          k1",
            "status       dead",
            "attempt      3",
            "last error   attempt 3, unavailable: 503",
            "result       -",
            "applied      no",
            "due          1970-01-01T00:01:00.000Z",
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
        let value = event_json(&event());
        assert_eq!(value["payload"]["order_id"], "ORD-1001");
        assert_eq!(value["attempts_spent"], 3);
        assert_eq!(value["last_error"]["kind"], "unavailable");
        assert_eq!(value["maybe_applied"], false);
    }

    #[test]
    fn an_event_that_may_have_been_applied_says_so_and_is_not_resumed() {
        let mut retried = event();
        retried.status = EventStatus::Pending;
        retried.maybe_applied = true;
        let text = describe(&retried);
        assert!(
            text.contains("applied      maybe: a delivery's answer was lost"),
            "{text}"
        );
        assert_eq!(event_json(&retried)["maybe_applied"], true);

        let mut unknown = retried;
        unknown.status = EventStatus::Unknown;
        let Failure::Refused(explained) = not_dead(&unknown) else {
            panic!("a refusal");
        };
        assert_eq!(explained.what, "the outbox event k1 is unknown, not dead");
        assert!(
            explained.next.contains("may have been applied")
                && explained.next.contains("the reconciler asks the provider"),
            "{explained:?}"
        );
    }

    #[test]
    fn a_live_event_is_not_resumed_and_the_refusal_says_its_status() {
        let mut pending = event();
        pending.status = EventStatus::Pending;
        let Failure::Refused(explained) = not_dead(&pending) else {
            panic!("a refusal");
        };
        assert_eq!(explained.what, "the outbox event k1 is pending, not dead");
    }
}
