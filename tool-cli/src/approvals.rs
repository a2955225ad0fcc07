//! `approvals list | show | approve | reject`: the approvals of operations over a tool's
//! threshold, and the decisions on them.

use serde_json::{Value, json};
use toolgate_core::identity::Operator;
use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, DecideRequest, Decided, Decision,
    OperationStore, Refusal, RunKey, RunRecord, Verdict,
};

use crate::error::Failure;
use crate::json::{Output, document, stored};
use crate::table::{Table, or_dash};
use crate::time::{now_ms, rfc3339};

/// `approvals list`: the approvals in `status` (every status for `None`), of `tenant` or of
/// every tenant, oldest first.
pub(crate) async fn list(
    store: &dyn OperationStore,
    status: Option<ApprovalStatus>,
    tenant: Option<&str>,
    output: Output,
) -> Result<String, Failure> {
    let query = ApprovalQuery {
        tenant,
        status,
        limit: 0,
    };
    let approvals = store
        .list_approvals(query)
        .await
        .map_err(|e| Failure::store("list the approvals", &e))?;
    if output.json {
        return Ok(document(&Value::Array(
            approvals
                .iter()
                .map(|a| approval_json(a, output.hashes))
                .collect(),
        )));
    }
    if approvals.is_empty() {
        let which = status.map_or(String::new(), |s| format!("{} ", s.as_str()));
        let of = tenant
            .map(|t| format!(" of tenant {t}"))
            .unwrap_or_default();
        return Ok(format!("no {which}approvals{of}\n"));
    }
    let mut table = Table::new(&[
        "ID",
        "TENANT",
        "TOOL",
        "AMOUNT",
        "THRESHOLD",
        "REQUESTER",
        "STATUS",
        "CREATED",
        "EXPIRES",
    ]);
    for a in &approvals {
        table.row(vec![
            a.id.clone(),
            a.tenant.clone(),
            a.tool.clone(),
            a.amount.clone(),
            a.threshold.clone(),
            a.requester.user.clone(),
            a.status.as_str().to_owned(),
            rfc3339(a.created_ms),
            rfc3339(a.expires_ms),
        ]);
    }
    Ok(table.render())
}

/// `approvals show ID`: everything about one approval (when `tenant` is given, only if it is
/// that tenant's).
pub(crate) async fn show(
    store: &dyn OperationStore,
    id: &str,
    tenant: Option<&str>,
    output: Output,
) -> Result<String, Failure> {
    let approval = store
        .approval(id)
        .await
        .map_err(|e| Failure::store(&format!("read approval {id}"), &e))?
        .filter(|a| tenant.is_none_or(|t| a.tenant == t))
        .ok_or_else(|| {
            let of = tenant
                .map(|t| format!(" of tenant {t}"))
                .unwrap_or_default();
            Failure::refused(
                format!("no approval {id}{of}"),
                format!("no approval{of} in this store has this id"),
                "list the approvals with `toolgate approvals list --status all`",
            )
        })?;
    let key = RunKey {
        tenant: &approval.tenant,
        run_id: &approval.run_id,
    };
    let run = store.run(key).await.map_err(|e| {
        Failure::store(
            &format!("read run {} of approval {id}", approval.run_id),
            &e,
        )
    })?;
    if output.json {
        let mut value = approval_json(&approval, output.hashes);
        value["run"] = run_json(run.as_ref());
        return Ok(document(&value));
    }
    let mut text = describe(&approval, output.hashes);
    text.push_str(&format!(
        "{:<22} {}\n",
        "run state",
        run_state(run.as_ref())
    ));
    Ok(text)
}

/// The state of an approval's run, as `approvals show` says it: aborted (with why), or not,
/// or unknown to the store.
pub(crate) fn run_state(run: Option<&RunRecord>) -> String {
    match run {
        None => {
            "no record in this store (an unshared run, counted in its session only; or purged after its retention)".to_owned()
        }
        Some(RunRecord {
            aborted: Some(abort),
            ..
        }) => format!(
            "aborted ({}): {}",
            abort.kind,
            abort.reason.replace(['\n', '\r', '\t'], " ")
        ),
        Some(run) => format!(
            "not aborted ({} turns, {} tool calls, last changed {})",
            run.steps,
            run.tool_calls,
            rfc3339(run.updated_ms)
        ),
    }
}

/// `run` as JSON: `state` is `aborted`, `not_aborted` or `unknown` (no record).
fn run_json(run: Option<&RunRecord>) -> Value {
    match run {
        None => json!({"state": "unknown"}),
        Some(run) => json!({
            "state": if run.aborted.is_some() { "aborted" } else { "not_aborted" },
            "aborted": run.aborted.as_ref().map(|a| json!({"kind": a.kind, "reason": a.reason})),
            "steps": run.steps,
            "tool_calls": run.tool_calls,
            "updated_ms": run.updated_ms,
            "updated_at": rfc3339(run.updated_ms),
        }),
    }
}

/// `approvals approve ID` or `approvals reject ID` (`verdict`) with `reason`, as `approver`:
/// what to tell the approver when the decision stands.
pub(crate) async fn decide(
    store: &dyn OperationStore,
    verdict: Verdict,
    id: &str,
    reason: &str,
    approver: &Operator,
) -> Result<String, Failure> {
    let request = DecideRequest {
        id,
        approver,
        verdict,
        reason,
        now_ms: now_ms(),
    };
    let decided = toolgate_core::approval::decide(store, request).await.map_err(|e| {
        let mut failure = Failure::store(&format!("decide on approval {id}"), &e);
        if let Failure::Store(explained) = &mut failure {
            explained.next = format!(
                "run `toolgate approvals show {id}`: a decision it lists stands (its audit record may be missing); otherwise decide again"
            );
        }
        failure
    })?;
    match decided {
        Decided::Applied(approval) => Ok(applied(&approval, verdict)),
        Decided::Refused { refusal, approval } => {
            Err(refused(verdict, id, refusal, approval.as_ref()))
        }
    }
}

fn applied(approval: &ApprovalRecord, verdict: Verdict) -> String {
    let (done, then) = match verdict {
        Verdict::Approve => (
            "approved",
            "it runs once, at the model's next call with the same arguments or by the application's runner, after the runtime checks it again",
        ),
        Verdict::Reject => (
            "rejected",
            "it will not run; the model's next identical call is answered with the rejection",
        ),
    };
    let by = approval
        .last_decision()
        .map(|d| format!(" by {}: {}", d.by, d.reason))
        .unwrap_or_default();
    format!(
        "approval {} ({}, amount {}, tenant {}) {done}{by}\n{then}\n",
        approval.id, approval.tool, approval.amount, approval.tenant
    )
}

fn refused(
    verdict: Verdict,
    id: &str,
    refusal: Refusal,
    approval: Option<&ApprovalRecord>,
) -> Failure {
    let verb = verdict.as_str();
    let next = match (refusal, approval) {
        (Refusal::NotFound, _) => {
            "check the id, and that the approver's token is of the approval's tenant (`toolgate approvals show ID` names it)".to_owned()
        }
        (Refusal::AlreadyDecided, _) | (Refusal::Expired, _) => {
            format!("see its decisions with `toolgate approvals show {id}`")
        }
        (Refusal::MissingPermission, Some(a)) => {
            format!(
                "decide with the token of an approver who holds `{}`",
                a.approver_permission
            )
        }
        (Refusal::MissingPermission, None) => {
            "decide with the token of an approver who holds the approval permission".to_owned()
        }
        (Refusal::SelfDecision, _) => "another approver of the tenant must decide".to_owned(),
        (Refusal::RunAborted, _) => format!(
            "nothing is left to decide; see the approval and why its run stopped with `toolgate approvals show {id}`"
        ),
    };
    Failure::refused(
        format!("could not {verb} approval {id}"),
        refusal.explain(approval),
        next,
    )
}

/// Every field of `approval` as text, one a line; the request and policy hashes only with
/// `hashes`.
fn describe(a: &ApprovalRecord, hashes: bool) -> String {
    let permissions = if a.requester.permissions.is_empty() {
        "none".to_owned()
    } else {
        a.requester.permissions.join(", ")
    };
    let fields = [
        ("approval", a.id.clone()),
        ("status", a.status.as_str().to_owned()),
        ("tenant", a.tenant.clone()),
        ("tool", a.tool.clone()),
        ("arguments", a.arguments.clone()),
        ("amount", a.amount.clone()),
        ("threshold", a.threshold.clone()),
        ("requester", a.requester.user.clone()),
        ("requester permissions", permissions),
        ("run", a.run_id.clone()),
        ("call", a.call_id.clone()),
        ("key", a.key.clone()),
        ("approver permission", a.approver_permission.clone()),
        ("created", rfc3339(a.created_ms)),
        ("expires", rfc3339(a.expires_ms)),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&format!("{name:<22} {value}\n"));
    }
    if hashes {
        out.push_str(&format!("{:<22} {}\n", "request hash", a.request_hash));
        out.push_str(&format!("{:<22} {}\n", "policy hash", a.policy_hash));
    }
    if a.decisions.is_empty() {
        out.push_str("decisions              none\n");
    } else {
        out.push_str("decisions\n");
        let mut table = Table::new(&["  AT", "VERDICT", "BY", "ISSUER", "REASON"]);
        for d in &a.decisions {
            table.row(vec![
                format!("  {}", rfc3339(d.at_ms)),
                d.verdict.as_str().to_owned(),
                d.by.clone(),
                or_dash(d.issuer.as_deref()),
                d.reason.clone(),
            ]);
        }
        out.push_str(&table.render());
    }
    out
}

/// `approval` as JSON: every field, times both as milliseconds and as RFC 3339; the request and
/// policy hashes only with `hashes`.
fn approval_json(a: &ApprovalRecord, hashes: bool) -> Value {
    let mut value = json!({
        "id": a.id,
        "status": a.status.as_str(),
        "tenant": a.tenant,
        "tool": a.tool,
        "arguments": stored(&a.arguments),
        "amount": a.amount,
        "threshold": a.threshold,
        "requester": {
            "user": a.requester.user,
            "permissions": a.requester.permissions,
        },
        "run_id": a.run_id,
        "call_id": a.call_id,
        "key": a.key,
        "approver_permission": a.approver_permission,
        "created_ms": a.created_ms,
        "created_at": rfc3339(a.created_ms),
        "expires_ms": a.expires_ms,
        "expires_at": rfc3339(a.expires_ms),
        "decisions": a.decisions.iter().map(decision_json).collect::<Vec<_>>(),
    });
    if hashes && let Some(fields) = value.as_object_mut() {
        fields.insert("request_hash".into(), a.request_hash.clone().into());
        fields.insert("policy_hash".into(), a.policy_hash.clone().into());
    }
    value
}

fn decision_json(d: &Decision) -> Value {
    json!({
        "verdict": d.verdict.as_str(),
        "by": d.by,
        "issuer": d.issuer,
        "at_ms": d.at_ms,
        "at": rfc3339(d.at_ms),
        "reason": d.reason,
    })
}

#[cfg(test)]
mod tests {
    use toolgate_core::store::Requester;

    use super::*;

    fn approval() -> ApprovalRecord {
        ApprovalRecord {
            id: "apr_1".into(),
            tenant: "acme".into(),
            key: "k1".into(),
            tool: "issue_refund".into(),
            request_hash: "h".into(),
            policy_hash: "p".into(),
            arguments: r#"{"amount":"8000.00","card":"[redacted]"}"#.into(),
            amount: "8000.00".into(),
            threshold: "5000".into(),
            requester: Requester {
                user: "agent".into(),
                permissions: vec!["refund:create".into()],
            },
            run_id: "r1".into(),
            call_id: "call_1".into(),
            approver_permission: "refund:approve".into(),
            created_ms: 0,
            expires_ms: 3_600_000,
            status: ApprovalStatus::Rejected,
            decisions: vec![Decision {
                verdict: Verdict::Reject,
                by: "manager".into(),
                issuer: Some("acme-ops".into()),
                at_ms: 60_000,
                reason: "too much\nfor one order".into(),
            }],
        }
    }

    #[test]
    fn show_names_every_field() {
        let text = describe(&approval(), false);
        for expected in [
            "approval               apr_1",
            "status                 rejected",
            r#"arguments              {"amount":"8000.00","card":"[redacted]"}"#,
            "threshold              5000",
            "requester permissions  refund:create",
            "approver permission    refund:approve",
            "created                1970-01-01T00:00:00.000Z",
            "expires                1970-01-01T01:00:00.000Z",
            "  1970-01-01T00:01:00.000Z  reject   manager  acme-ops  too much for one order",
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
    }

    #[test]
    fn the_hashes_are_printed_only_when_asked() {
        let text = describe(&approval(), false);
        assert!(!text.contains("hash"), "{text}");
        let text = describe(&approval(), true);
        assert!(text.contains("request hash           h\n"), "{text}");
        assert!(text.contains("policy hash            p\n"), "{text}");
        let value = approval_json(&approval(), false);
        assert!(value.get("request_hash").is_none() && value.get("policy_hash").is_none());
        let value = approval_json(&approval(), true);
        assert_eq!(
            (&value["request_hash"], &value["policy_hash"]),
            (&"h".into(), &"p".into())
        );
    }

    #[test]
    fn json_embeds_the_arguments_and_both_time_forms() {
        let value = approval_json(&approval(), false);
        assert_eq!(value["arguments"]["card"], "[redacted]");
        assert_eq!(value["expires_at"], "1970-01-01T01:00:00.000Z");
        assert_eq!(value["expires_ms"], 3_600_000);
        assert_eq!(value["decisions"][0]["verdict"], "reject");
        assert_eq!(value["requester"]["permissions"][0], "refund:create");
    }
}
