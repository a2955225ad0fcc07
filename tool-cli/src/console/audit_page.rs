//! The audit trail, searched by run, call id or key, in the order it was appended, reloading
//! itself every 5 seconds while it shows a search.

use toolgate_core::store::{AuditQuery, AuditRecord};

use super::Console;
use super::html::Html;
use super::http::Request;
use super::layout::{self, Area};
use super::sessions::Session;
use crate::audit::with_operations;
use crate::error::Failure;
use crate::time::rfc3339;

/// How often a page showing a trail reloads itself.
const REFRESH_S: u32 = 5;

/// `GET /audit?run=&call=&key=`. A run's trail holds the records of its calls and decisions,
/// and those of its operations that belong to no run (outbox deliveries, operators' actions);
/// a key's, every record of that operation; a call id narrows either, or alone searches the
/// tenant's whole trail.
pub(crate) async fn show(
    console: &Console,
    session: &Session,
    request: &Request,
) -> Result<String, Failure> {
    let (run, call, key) = (
        request.param("run"),
        request.param("call"),
        request.param("key"),
    );
    let mut body = Html::new();
    search_form(&mut body, run, call, key);
    if run.is_none() && call.is_none() && key.is_none() {
        body.raw(r#"<p class="note">Give a run, a call id or an operation's key. The approvals and operations pages link here.</p>"#);
        return Ok(layout::page(
            Area::Audit,
            "Audit trail",
            session,
            body,
            None,
        ));
    }
    let records = search(console, session.operator.tenant(), run, call, key).await?;
    if records.is_empty() {
        body.raw(r#"<p id="empty">No audit records match.</p>"#);
    } else {
        table(&mut body, &records);
    }
    Ok(layout::page(
        Area::Audit,
        "Audit trail",
        session,
        body,
        Some(REFRESH_S),
    ))
}

async fn search(
    console: &Console,
    tenant: &str,
    run: Option<&str>,
    call: Option<&str>,
    key: Option<&str>,
) -> Result<Vec<AuditRecord>, Failure> {
    let store = console.store();
    let query = AuditQuery {
        tenant: Some(tenant),
        run_id: run,
        key: if run.is_some() { None } else { key },
        limit: 0,
    };
    let read = |e| Failure::store("read the audit trail", &e);
    let mut records = store.audit(query).await.map_err(read)?;
    if run.is_some() {
        records = with_operations(store, records).await.map_err(read)?;
        if let Some(key) = key {
            records.retain(|r| r.entry.key.as_deref() == Some(key));
        }
    }
    if let Some(call) = call {
        records.retain(|r| r.entry.call_id == call);
    }
    Ok(records)
}

fn search_form(body: &mut Html, run: Option<&str>, call: Option<&str>, key: Option<&str>) {
    body.raw(r#"<form class="act" method="get" action="/audit"><input type="text" name="run" placeholder="run" aria-label="run" value=""#)
        .text(run.unwrap_or_default())
        .raw(r#""><input type="text" name="call" placeholder="call id" aria-label="call id" value=""#)
        .text(call.unwrap_or_default())
        .raw(r#""><input type="text" name="key" placeholder="operation key" aria-label="operation key" value=""#)
        .text(key.unwrap_or_default())
        .raw(r#""><button type="submit">Search</button></form><p class="note">In the order appended; this page reloads itself every 5 seconds.</p>"#);
}

fn table(body: &mut Html, records: &[AuditRecord]) {
    body.raw(
        r#"<table id="trail"><tr><th>#</th><th>Time</th><th>Kind</th><th>Call</th><th>Tool</th><th>Outcome</th><th>Actor</th><th>Reason</th><th>Run, key, approval and arguments (redacted)</th></tr>"#,
    );
    for r in records {
        let e = &r.entry;
        let outcome = match &e.error_kind {
            Some(kind) => format!("{} ({kind})", e.outcome),
            None => e.outcome.clone(),
        };
        body.raw(r#"<tr class="kind-"#)
            .text(e.kind.as_str())
            .raw(r#""><td>"#)
            .number(r.seq)
            .raw("</td>")
            .cell(&rfc3339(e.at_ms))
            .cell(e.kind.as_str())
            .cell(if e.call_id.is_empty() {
                "—"
            } else {
                &e.call_id
            })
            .cell(&e.tool)
            .raw(r#"<td class="outcome">"#)
            .text(&outcome)
            .raw(r#"<br><span class="note">"#)
            .number(e.attempts)
            .raw(if e.attempts == 1 {
                " attempt"
            } else {
                " attempts"
            });
        if e.replayed {
            body.raw(", replayed");
        }
        body.raw("</span></td>")
            .cell(&e.actor)
            .cell(e.reason.as_deref().unwrap_or("—"))
            .raw(r#"<td class="details"><code>run "#)
            .text(if e.run_id.is_empty() {
                "—"
            } else {
                &e.run_id
            })
            .raw("\nkey ")
            .text(e.key.as_deref().unwrap_or("—"))
            .raw("\napproval ")
            .text(e.approval_id.as_deref().unwrap_or("—"))
            .raw("\n")
            .text(&e.arguments)
            .raw("</code></td></tr>");
    }
    body.raw("</table>");
}
