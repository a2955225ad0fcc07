//! The tenant's write operations by state; an operation whose outcome is unknown is settled here
//! by hand, as applied or not, with the evidence.

use toolgate_core::store::{OperationQuery, OperationRecord, OperationState};

use super::html::Html;
use super::http::Request;
use super::layout::{self, Area, chosen_status, filters};
use super::sessions::{Flash, Session};
use super::{Console, flash_of};
use crate::error::Failure;
use crate::settle::{self, Settlement};
use crate::time::rfc3339;

/// `GET /operations?status=`: unknown outcomes by default.
pub(crate) async fn show(
    console: &Console,
    session: &Session,
    request: &Request,
) -> Result<String, Failure> {
    let states = OperationState::ALL.iter().map(|s| s.as_str());
    let (names, filter) = chosen_status(request, states, OperationState::OutcomeUnknown.as_str());
    let tenant = session.operator.tenant();
    let query = OperationQuery {
        tenant: Some(tenant),
        state: OperationState::parse(filter),
        run_id: None,
        limit: 0,
    };
    let records = console
        .store()
        .list_operations(query)
        .await
        .map_err(|e| Failure::store("list the operations", &e))?;
    let mut body = Html::new();
    filters(&mut body, "/operations", &names, filter);
    if records.is_empty() {
        body.raw(r#"<p id="empty">No operations of tenant "#)
            .text(tenant)
            .raw(" in this state.</p>");
    } else {
        body.raw(
            "<table><tr><th>Key</th><th>Tool</th><th>State</th><th>Attempts</th><th>Arguments (as stored, redacted)</th><th>Result</th><th>Updated</th><th>Approval</th><th>Settle</th></tr>",
        );
        for record in &records {
            row(session, &mut body, record);
        }
        body.raw("</table>");
    }
    Ok(layout::page(
        Area::Operations,
        "Operations",
        session,
        body,
        None,
    ))
}

fn row(session: &Session, body: &mut Html, r: &OperationRecord) {
    body.raw(r#"<tr data-key=""#)
        .text(&r.key)
        .raw(r#""><td><a href="/audit?key="#)
        .query(&r.key)
        .raw(r#""><code>"#)
        .text(&r.key)
        .raw("</code></a></td>")
        .cell(&r.tool)
        .cell(r.state.as_str())
        .raw("<td>")
        .number(r.attempt)
        .raw("</td>")
        .code_cell(&r.arguments)
        .code_cell(r.result.as_deref().unwrap_or("—"))
        .cell(&rfc3339(r.updated_ms))
        .cell(r.approval_id.as_deref().unwrap_or("—"))
        .raw("<td>");
    if r.state == OperationState::OutcomeUnknown {
        body.raw(r#"<form class="act" method="post" action="/operations/settle">"#)
            .csrf_field(&session.csrf)
            .hidden("key", &r.key)
            .raw(r#"<input type="text" name="evidence" placeholder="evidence: the provider's reference, or what its ledger shows" aria-label="evidence" maxlength="2000" required><button type="submit" name="outcome" value="applied">Applied</button><button type="submit" name="outcome" value="not_applied">Not applied</button></form>"#);
    } else {
        body.raw("—");
    }
    body.raw("</td></tr>");
}

/// `POST /operations/settle`: `key`, `outcome` (`applied` or `not_applied`), `evidence`.
pub(crate) async fn settle(console: &Console, session: &Session, request: &Request) -> Flash {
    let applied = match request.field("outcome") {
        Some("applied") => true,
        Some("not_applied") => false,
        _ => {
            return flash_of(Err(Failure::usage(
                "no outcome",
                "an unknown outcome is settled as applied or as not applied",
                "press Applied or Not applied",
            )));
        }
    };
    let evidence = request.field("evidence").unwrap_or_default();
    if evidence.trim().is_empty() {
        return flash_of(Err(Failure::usage(
            "the evidence is empty",
            "a settlement is kept with what shows the operation's outcome",
            "write the provider's reference, or what you saw in its ledger",
        )));
    }
    let settlement = Settlement {
        key: request.field("key").unwrap_or_default(),
        applied,
        evidence,
        json: false,
    };
    flash_of(settle::settle(console.store(), &settlement, &session.operator).await)
}
