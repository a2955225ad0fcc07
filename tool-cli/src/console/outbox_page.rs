//! The tenant's outbox: dead letters first; a dead event is resumed here, with a reason.

use toolgate_core::store::{EventQuery, EventStatus, OutboxEvent};

use super::html::Html;
use super::http::Request;
use super::layout::{self, Area, chosen_status, filters};
use super::sessions::{Flash, Session};
use super::{Console, flash_of};
use crate::error::Failure;
use crate::outbox::{self, Resume};
use crate::time::rfc3339;

/// `GET /outbox?status=`: dead events by default.
pub(crate) async fn show(
    console: &Console,
    session: &Session,
    request: &Request,
) -> Result<String, Failure> {
    let statuses = EventStatus::ALL.iter().map(|s| s.as_str());
    let (names, filter) = chosen_status(request, statuses, EventStatus::Dead.as_str());
    let tenant = session.operator.tenant();
    let query = EventQuery {
        tenant: Some(tenant),
        status: EventStatus::parse(filter),
        limit: 0,
    };
    let events = console
        .store()
        .list_events(query)
        .await
        .map_err(|e| Failure::store("list the outbox events", &e))?;
    let mut body = Html::new();
    filters(&mut body, "/outbox", &names, filter);
    if events.is_empty() {
        body.raw(r#"<p id="empty">No outbox events of tenant "#)
            .text(tenant)
            .raw(" in this state.</p>");
    } else {
        body.raw(
            "<table><tr><th>Key</th><th>Tool</th><th>Status</th><th>Attempts</th><th>Due</th><th>Updated</th><th>Last error</th><th>Resume</th></tr>",
        );
        for event in &events {
            row(session, &mut body, event);
        }
        body.raw("</table>");
    }
    Ok(layout::page(Area::Outbox, "Outbox", session, body, None))
}

fn row(session: &Session, body: &mut Html, e: &OutboxEvent) {
    let last_error = e
        .last_error
        .as_ref()
        .map(|err| format!("{}: {}", err.kind, err.what))
        .unwrap_or_else(|| "—".to_owned());
    body.raw(r#"<tr data-key=""#)
        .text(&e.key)
        .raw(r#""><td><a href="/audit?key="#)
        .query(&e.key)
        .raw(r#""><code>"#)
        .text(&e.key)
        .raw("</code></a></td>")
        .cell(&e.tool)
        .cell(e.status.as_str())
        .raw("<td>")
        .number(e.attempt)
        .raw("</td>")
        .cell(&rfc3339(e.due_ms))
        .cell(&rfc3339(e.updated_ms))
        .code_cell(&last_error)
        .raw("<td>");
    if e.status == EventStatus::Dead {
        body.raw(r#"<form class="act" method="post" action="/outbox/resume">"#)
            .csrf_field(&session.csrf)
            .hidden("key", &e.key)
            .raw(r#"<input type="text" name="reason" placeholder="reason (optional)" aria-label="reason for the resume" maxlength="2000"><button type="submit">Resume</button></form>"#);
    } else {
        body.raw("—");
    }
    body.raw("</td></tr>");
}

/// `POST /outbox/resume`: `key`, and a `reason` that may be empty.
pub(crate) async fn resume(console: &Console, session: &Session, request: &Request) -> Flash {
    let resume = Resume {
        key: request.field("key").unwrap_or_default(),
        reason: request.field("reason").filter(|r| !r.trim().is_empty()),
        json: false,
    };
    flash_of(outbox::resume(console.store(), &resume, &session.operator).await)
}
