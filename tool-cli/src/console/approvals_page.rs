//! The approval queue: the tenant's approvals with what each asks (tool, amount over which
//! threshold, the arguments as stored, redacted), who asked, its run and the run's state, when
//! it expires; approve or reject a pending one with a reason.

use toolgate_core::store::{ApprovalQuery, ApprovalRecord, ApprovalStatus, RunKey, Verdict};

use super::html::Html;
use super::http::Request;
use super::layout::{self, Area, chosen_status, filters};
use super::sessions::{Flash, Session};
use super::{Console, flash_of};
use crate::approvals;
use crate::error::Failure;
use crate::time::rfc3339;

/// The statuses the page filters on.
const STATUSES: [ApprovalStatus; 3] = [
    ApprovalStatus::Pending,
    ApprovalStatus::Approved,
    ApprovalStatus::Rejected,
];

/// `GET /approvals?status=`: pending ones by default.
pub(crate) async fn show(
    console: &Console,
    session: &Session,
    request: &Request,
) -> Result<String, Failure> {
    let statuses = STATUSES.map(ApprovalStatus::as_str);
    let (names, filter) = chosen_status(request, statuses, ApprovalStatus::Pending.as_str());
    let store = console.store();
    let tenant = session.operator.tenant();
    let query = ApprovalQuery {
        tenant: Some(tenant),
        status: ApprovalStatus::parse(filter),
        limit: 0,
    };
    let approvals = store
        .list_approvals(query)
        .await
        .map_err(|e| Failure::store("list the approvals", &e))?;
    let mut body = Html::new();
    filters(&mut body, "/approvals", &names, filter);
    if approvals.is_empty() {
        body.raw(r#"<p id="empty">No "#)
            .text(if filter == "all" { "" } else { filter })
            .raw(" approvals of tenant ")
            .text(tenant)
            .raw(".</p>");
    } else {
        body.raw(
            "<table><tr><th>Approval</th><th>Tool</th><th>Amount</th><th>Threshold</th><th>Arguments (as stored, redacted)</th><th>Requester</th><th>Run</th><th>Expires</th><th>Status</th><th>Decide</th></tr>",
        );
        for approval in &approvals {
            row(console, session, &mut body, approval).await?;
        }
        body.raw("</table>");
    }
    Ok(layout::page(
        Area::Approvals,
        "Approvals",
        session,
        body,
        None,
    ))
}

/// One approval's row.
async fn row(
    console: &Console,
    session: &Session,
    body: &mut Html,
    a: &ApprovalRecord,
) -> Result<(), Failure> {
    let key = RunKey {
        tenant: &a.tenant,
        run_id: &a.run_id,
    };
    let run =
        console.store().run(key).await.map_err(|e| {
            Failure::store(&format!("read run {} of approval {}", a.run_id, a.id), &e)
        })?;
    body.raw(r#"<tr data-approval=""#)
        .text(&a.id)
        .raw(r#""><td><code>"#)
        .text(&a.id)
        .raw("</code></td>")
        .cell(&a.tool)
        .raw(r#"<td class="amount">"#)
        .text(&a.amount)
        .raw("</td>")
        .cell(&a.threshold)
        .raw(r#"<td class="arguments"><code>"#)
        .text(&a.arguments)
        .raw("</code></td>")
        .cell(&a.requester.user)
        .raw(r#"<td><a href="/audit?run="#)
        .query(&a.run_id)
        .raw(r#"">"#)
        .text(&a.run_id)
        .raw(r#"</a><br><span class="note">"#)
        .text(&approvals::run_state(run.as_ref()))
        .raw("</span></td>")
        .cell(&rfc3339(a.expires_ms))
        .raw(r#"<td class="status">"#)
        .text(a.status.as_str());
    for d in &a.decisions {
        body.raw(r#"<br><span class="note">"#)
            .text(d.verdict.as_str())
            .raw(" by ")
            .text(&d.by)
            .raw(" (")
            .text(d.issuer.as_deref().unwrap_or("no issuer recorded"))
            .raw("): ")
            .text(&d.reason)
            .raw("</span>");
    }
    body.raw("</td><td>");
    if a.status == ApprovalStatus::Pending {
        body.raw(r#"<form class="act" method="post" action="/approvals/decide">"#)
            .csrf_field(&session.csrf)
            .hidden("id", &a.id)
            .raw(r#"<input type="text" name="reason" placeholder="reason" aria-label="reason for the decision" maxlength="2000" required><button type="submit" name="verdict" value="approve">Approve</button><button type="submit" name="verdict" value="reject">Reject</button></form>"#);
    } else {
        body.raw("—");
    }
    body.raw("</td></tr>");
    Ok(())
}

/// `POST /approvals/decide`: `id`, `verdict` (`approve` or `reject`), `reason`.
pub(crate) async fn decide(console: &Console, session: &Session, request: &Request) -> Flash {
    let id = request.field("id").unwrap_or_default();
    let verdict = match request.field("verdict") {
        Some("approve") => Verdict::Approve,
        Some("reject") => Verdict::Reject,
        _ => {
            return flash_of(Err(Failure::usage(
                "no verdict",
                "a decision is approve or reject",
                "press Approve or Reject",
            )));
        }
    };
    let reason = request.field("reason").unwrap_or_default();
    if reason.trim().is_empty() {
        return flash_of(Err(Failure::usage(
            "the reason is empty",
            "a decision is stored with why it was made",
            "write the decision's reason",
        )));
    }
    let decided = approvals::decide(console.store(), verdict, id, reason, &session.operator).await;
    flash_of(decided)
}
