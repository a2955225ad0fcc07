//! The desk's scripts as stories of toolgate's chaos kit (`toolgate_test::chaos::Story`, JSON
//! Lines too), so that the kit plays the desk's scenarios on the shop, with the fake payment
//! provider behind the kit's fault proxy, and checks them against the provider's ledger.
//!
//! Most lines are the same in both formats. The others:
//!
//! | the desk's line | the kit's |
//! |---|---|
//! | (before the first) | the desk's default `session`: tenant `acme`, user `agent`, `orders:read` and `refund:create` |
//! | `fault` of an `operation` | `fault` of its route: `refund` is `POST /refunds`, `lookup` `GET /refunds/`, `order` `GET /orders/` (and the order's id when the line names one), `crm` `POST /crm`, `notify` `POST /notifications`; `unavailable_before_apply` is `unavailable`, `timeout_after_apply` `drop_after_apply`, `slow` `delay` |
//! | `approve` / `reject` by an approver of another tenant | the same, between two `session` lines of the approver's tenant (the kit decides in the session's tenant, the desk in the approver's) |
//! | `delivery` | the act `delivery` (`{"mode": "direct" \| "outbox"}`), then `restart`: the dispatcher is built again with `issue_refund` delivered that way, as the desk builds it again |
//! | `provider_refund` | the act `provider_refund`, with the line's object |
//!
//! A line the desk refuses (its answer is an `{"error": …}` and it changes nothing) is left out.

use serde_json::{Value, json};
use toolgate::AuthContext;
use toolgate::tool::Delivery;

use super::script::{Line, decode};
use crate::fake_provider::{Fault, Operation};
use crate::payments::client::segment;
use crate::payments::server::fault_line;

/// The name of the act that switches how `issue_refund` is delivered.
pub const DELIVERY_ACT: &str = "delivery";
/// The name of the act that refunds at the provider by hand, outside the agent.
pub const PROVIDER_REFUND_ACT: &str = "provider_refund";

/// `script`, a desk script, as a kit story: JSON Lines, one line each after the other.
///
/// # Errors
///
/// A line the kit's story format cannot say: a fault on the refunds, CRM updates or
/// notifications of one order (the kit chooses requests by method and path, and those carry
/// the order in their body).
pub fn kit_story(script: &[u8]) -> Result<String, String> {
    let mut tenant = "acme".to_owned();
    let mut session = session_line(&super::default_auth());
    let mut story = vec![session.clone()];
    for (index, line) in script.split(|&byte| byte == b'\n').enumerate() {
        let number = index + 1;
        let Some(Ok(text)) = decode(number, line) else {
            continue;
        };
        let Ok(line) = Line::parse(text) else {
            continue;
        };
        match line {
            Line::Session(auth) => {
                tenant = auth.tenant().to_owned();
                session = session_line(&auth);
                story.push(session.clone());
            }
            Line::Run(id, None) => story.push(json!({"run": id})),
            Line::Run(id, Some(limits)) => story.push(json!({"run": {
                "id": id,
                "max_steps": limits.max_steps,
                "max_tool_calls": limits.max_tool_calls,
                "retry_budget": limits.retry_budget,
            }})),
            Line::Turn(dialect, message) => {
                let message: Value =
                    serde_json::from_str(message).map_err(|err| format!("line {number}: {err}"))?;
                story.push(json!({ dialect.key(): message }));
            }
            Line::Fault(spec) => {
                if let Some(fault) = fault(&spec).map_err(|why| format!("line {number}: {why}"))? {
                    story.push(fault);
                }
            }
            Line::Reconcile => story.push(json!({"reconcile": {}})),
            Line::Restart => story.push(json!({"restart": {}})),
            Line::RunApproved => story.push(json!({"run_approved": {}})),
            Line::Deliver => story.push(json!({"deliver": {}})),
            Line::Decide {
                verdict,
                approver,
                reason,
            } => {
                let elsewhere = approver.tenant() != tenant;
                if elsewhere {
                    let mut there = session.clone();
                    there["session"]["tenant"] = json!(approver.tenant());
                    story.push(there);
                }
                let permissions: Vec<&str> = approver.permissions().collect();
                story.push(json!({ verdict.as_str(): {
                    "approver": approver.user(),
                    "permissions": permissions,
                    "reason": reason,
                }}));
                if elsewhere {
                    story.push(session.clone());
                }
            }
            Line::Delivery(delivery) => {
                let mode = match delivery {
                    Delivery::Outbox => "outbox",
                    _ => "direct",
                };
                story.push(json!({"act": {"name": DELIVERY_ACT, "args": {"mode": mode}}}));
                story.push(json!({"restart": {}}));
            }
            Line::ProviderRefund {
                order_id,
                amount_cents,
                key,
            } => story.push(json!({"act": {"name": PROVIDER_REFUND_ACT, "args": {
                "order_id": order_id, "amount_cents": amount_cents, "key": key,
            }}})),
        }
    }
    Ok(story.iter().map(|line| format!("{line}\n")).collect())
}

fn session_line(auth: &AuthContext) -> Value {
    let permissions: Vec<&str> = auth.permissions().collect();
    json!({"session": {"tenant": auth.tenant(), "user": auth.user(), "permissions": permissions}})
}

/// The kit's `fault` line for the desk's `spec`; `None` when the desk refuses it.
fn fault(spec: &Value) -> Result<Option<Value>, String> {
    let Ok((operation, order_id, fault, times)) = fault_line(spec) else {
        return Ok(None);
    };
    let route = match (operation, order_id) {
        (Operation::Refund, None) => "POST /refunds".to_owned(),
        (Operation::Lookup, None) => "GET /refunds/".to_owned(),
        (Operation::Order, None) => "GET /orders/".to_owned(),
        (Operation::Order, Some(order_id)) => format!("GET /orders/{}", segment(&order_id)),
        (Operation::Crm, None) => "POST /crm".to_owned(),
        (Operation::Notify, None) => "POST /notifications".to_owned(),
        (operation, Some(order_id)) => {
            return Err(format!(
                "a fault on the {operation:?} requests of {order_id} alone: the kit chooses \
                 requests by method and path, and these carry the order in their body"
            ));
        }
    };
    let mut line = json!({"route": route, "times": times});
    match fault {
        Fault::UnavailableBeforeApply => line["kind"] = json!("unavailable"),
        Fault::TimeoutAfterApply => line["kind"] = json!("drop_after_apply"),
        Fault::ResetAfterApply => line["kind"] = json!("reset_after_apply"),
        Fault::Slow(delay) => {
            line["kind"] = json!("delay");
            line["ms"] = json!(delay.as_millis());
        }
    }
    Ok(Some(json!({ "fault": line })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(story: &str) -> Vec<Value> {
        story
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn each_line_of_the_desk_becomes_the_kit_s() {
        let script = br#"{"run": "r1"}
{"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 2}}
{"fault": {"operation": "order", "order_id": "ORD-1002", "kind": "slow", "ms": 1500}}
{"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 4000000000}}
{"delivery": "outbox"}
{"provider_refund": {"order_id": "ORD-1002", "amount_cents": 100, "key": "dashboard-1"}}
{"approve": {"approver": {"tenant": "globex", "user": "manager", "permissions": ["refund:approve"]}, "reason": "ok"}}
{"rerun": {}}
{"deliver": {}}
"#;
        let session = json!({"session": {"tenant": "acme", "user": "agent",
            "permissions": ["orders:read", "refund:create"]}});
        let mut elsewhere = session.clone();
        elsewhere["session"]["tenant"] = json!("globex");
        assert_eq!(
            lines(&kit_story(script).unwrap()),
            [
                session.clone(),
                json!({"run": "r1"}),
                json!({"fault": {"route": "POST /refunds", "kind": "drop_after_apply", "times": 2}}),
                json!({"fault": {"route": "GET /orders/ORD-1002", "kind": "delay", "ms": 1500,
                    "times": 1}}),
                json!({"act": {"name": "delivery", "args": {"mode": "outbox"}}}),
                json!({"restart": {}}),
                json!({"act": {"name": "provider_refund", "args": {"order_id": "ORD-1002",
                    "amount_cents": 100, "key": "dashboard-1"}}}),
                elsewhere,
                json!({"approve": {"approver": "manager", "permissions": ["refund:approve"],
                    "reason": "ok"}}),
                session,
                json!({"deliver": {}}),
            ],
            "a fault over the desk's limit and an unknown line are left out, as the desk \
             refuses them"
        );
    }

    #[test]
    fn a_fault_on_one_order_s_refunds_cannot_be_said() {
        let script =
            br#"{"fault": {"operation": "refund", "order_id": "ORD-1001", "kind": "reset_after_apply"}}"#;
        let refused = kit_story(script).unwrap_err();
        assert!(
            refused.starts_with("line 1: a fault on the Refund requests of ORD-1001"),
            "{refused}"
        );
    }
}
