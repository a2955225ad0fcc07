//! The frame of every page: its head, the navigation, who is signed in, what the last action
//! came to; and the pages that are not an area's: signing in, and a refusal.

use super::html::Html;
use super::http::Request;
use super::sessions::{Flash, Session};

/// The console's style sheet, served at `/console.css` (the pages hold no style of their own:
/// the content security policy allows only this one).
pub(crate) const CSS: &str = "\
body{font-family:system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{display:flex;gap:1.5rem;align-items:center;padding:.6rem 1.5rem;background:#1d2430;color:#fff}
header a{color:#cfe1ff;text-decoration:none;font-weight:600;margin-right:1rem}
header a.here{color:#fff;border-bottom:2px solid #7fb0ff}
header .who{margin-left:auto;font-size:.9rem;color:#c8ced8}
header form{margin:0}
main{padding:1rem 1.5rem}
h1{font-size:1.4rem;margin:.4rem 0 1rem}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.9rem}
th,td{border:1px solid #d9dde3;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#eef1f5}
code{font-family:ui-monospace,monospace;font-size:.85rem;white-space:pre-wrap;word-break:break-all}
.filters a{margin-right:.8rem}
.filters a.here{font-weight:700;text-decoration:none;color:#1d2430}
.flash{padding:.6rem .9rem;margin-bottom:1rem;border-radius:4px}
.done{background:#e3f5e6;border:1px solid #9ad1a4}
.failed{background:#fde8e8;border:1px solid #eaa4a4}
.failed p{margin:.2rem 0}
form.act{display:flex;gap:.4rem;flex-wrap:wrap;margin:0}
form.act input[type=text]{min-width:12rem}
button{cursor:pointer}
.note{color:#5b6472;font-size:.85rem}
td.details{min-width:22rem;max-width:34rem}
td.arguments{min-width:16rem;max-width:30rem}
.login{max-width:40rem;margin:3rem auto;background:#fff;padding:1.5rem;border:1px solid #d9dde3}
.login textarea{width:100%;height:7rem;font-family:ui-monospace,monospace}
";

/// The areas, as the navigation lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    Approvals,
    Operations,
    Outbox,
    Audit,
}

impl Area {
    const ALL: [(Area, &'static str, &'static str); 4] = [
        (Area::Approvals, "/approvals", "Approvals"),
        (Area::Operations, "/operations", "Operations"),
        (Area::Outbox, "/outbox", "Outbox"),
        (Area::Audit, "/audit", "Audit trail"),
    ];
}

/// A page of `area` titled `title`, with `body`, for `session`; every `refresh_s` seconds it
/// reloads itself, when given.
pub(crate) fn page(
    area: Area,
    title: &'static str,
    session: &Session,
    body: Html,
    refresh_s: Option<u32>,
) -> String {
    let mut html = head(title);
    if let Some(seconds) = refresh_s {
        html.raw(r#"<meta http-equiv="refresh" content=""#)
            .number(seconds)
            .raw(r#"">"#);
    }
    html.raw("</head><body><header><strong>toolgate console</strong><nav>");
    for (each, path, name) in Area::ALL {
        html.raw(r#"<a href=""#).raw(path).raw(r#"""#);
        if each == area {
            html.raw(r#" class="here""#);
        }
        html.raw(">").raw(name).raw("</a> ");
    }
    let operator = &session.operator;
    html.raw(r#"</nav><span class="who">"#)
        .text(operator.subject())
        .raw(" · tenant ")
        .text(operator.tenant())
        .raw(" · issuer ")
        .text(operator.issuer())
        .raw(r#"</span><form method="post" action="/logout">"#)
        .csrf_field(&session.csrf)
        .raw(r#"<button type="submit">Sign out</button></form></header><main><h1>"#)
        .raw(title)
        .raw("</h1>");
    if let Some(flash) = &session.flash {
        html.append(flash_box(flash));
    }
    html.append(body).raw("</main></body></html>");
    html.into_string()
}

/// What the last action came to.
fn flash_box(flash: &Flash) -> Html {
    let mut html = Html::new();
    match flash {
        Flash::Done(text) => {
            html.raw(r#"<div class="flash done" id="flash">"#)
                .text(text)
                .raw("</div>");
        }
        Flash::Failed { what, why, next } => {
            html.raw(r#"<div class="flash failed" id="flash"><p><strong>"#)
                .text(what)
                .raw("</strong></p><p>Why: ")
                .text(why)
                .raw("</p><p>Next: ")
                .text(next)
                .raw("</p></div>");
        }
    }
    html
}

fn head(title: &'static str) -> Html {
    let mut html = Html::new();
    html.raw(r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/console.css"><title>toolgate · "#)
        .raw(title)
        .raw("</title>");
    html
}

/// The sign-in page: a form for an operator token, carrying `csrf` (the sign-in cookie's
/// value), with why the last attempt was refused, if it was.
pub(crate) fn login(csrf: &str, refused: Option<&Flash>) -> String {
    let mut html = head("sign in");
    html.raw(r#"</head><body><div class="login"><h1>Sign in to the toolgate console</h1>"#);
    if let Some(flash) = refused {
        html.append(flash_box(flash));
    }
    html.raw(r#"<form method="post" action="/login">"#)
        .csrf_field(csrf)
        .raw(
            r#"<p><label for="token">Your operator token</label></p><p><textarea id="token" name="token" autocomplete="off" spellcheck="false" required></textarea></p><p><button type="submit" id="sign-in">Sign in</button></p></form><p class="note">An issuer of your tenant signs tokens with <code>toolgate operators issue</code>. The console checks the token against the issuer keys its store holds; the session lasts until the token expires, 8 hours at most, or until the console stops.</p></div></body></html>"#,
        );
    html.into_string()
}

/// A page that refuses a request: what, why, what to do (`failed`), and a way back.
pub(crate) fn refusal(failed: &Flash) -> String {
    let mut html = head("refused");
    html.raw(r#"</head><body><main><h1>Refused</h1>"#)
        .append(flash_box(failed))
        .raw(r#"<p><a href="/approvals">Back to the console</a></p></main></body></html>"#);
    html.into_string()
}

/// The status a list is filtered on: the request's `status` when it is one of `statuses` (their
/// names) or `all`, else `default`.
pub(crate) fn chosen_status(
    request: &Request,
    statuses: impl IntoIterator<Item = &'static str>,
    default: &'static str,
) -> (Vec<&'static str>, &'static str) {
    let names: Vec<&'static str> = statuses.into_iter().chain(["all"]).collect();
    let chosen = request
        .param("status")
        .and_then(|s| names.iter().find(|n| **n == s).copied())
        .unwrap_or(default);
    (names, chosen)
}

/// The links that filter a list: `path?status=NAME` for each of `names`, `here` marked.
pub(crate) fn filters(body: &mut Html, path: &'static str, names: &[&'static str], here: &str) {
    body.raw(r#"<p class="filters">Show: "#);
    for name in names {
        body.raw(r#"<a href=""#)
            .raw(path)
            .raw("?status=")
            .raw(name)
            .raw(r#"""#);
        if *name == here {
            body.raw(r#" class="here""#);
        }
        body.raw(">").raw(name).raw("</a>");
    }
    body.raw("</p>");
}
