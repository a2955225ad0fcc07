//! Which page or action a request is for, and who may have it: the sign-in page and the style
//! sheet to anyone, everything else to a signed-in operator; every form posted with the
//! session's CSRF token, and from the console's own pages.

use http::{Method, StatusCode};

use super::http::{Answer, Request};
use super::layout;
use super::sessions::{self, Flash, LOGIN_COOKIE, SESSION_COOKIE, Session};
use super::{Console, approvals_page, audit_page, operations_page, outbox_page};
use crate::error::Failure;
use crate::sign_in::sign_in;

/// The answer to `request` at `now_ms`.
pub(crate) async fn answer(console: &Console, request: &Request, now_ms: i64) -> Answer {
    if !console.answers_host(request.host.as_deref()) {
        return Answer::plain(
            StatusCode::MISDIRECTED_REQUEST,
            "this console answers only at the loopback address it listens on",
        );
    }
    if request.method == Method::POST && !same_origin(request) {
        return refused(
            "the form was refused",
            "it was posted from another site's page",
            "use the console's own pages",
        );
    }
    match (&request.method, request.path.as_str()) {
        (&Method::GET, "/console.css") => return Answer::css(layout::CSS),
        (&Method::GET, "/login") => return login_page(request, None),
        (&Method::POST, "/login") => return log_in(console, request, now_ms).await,
        _ => {}
    }
    let signed_in = request
        .cookie(SESSION_COOKIE)
        .and_then(|id| Some((id, console.sessions.get(id, now_ms)?)));
    let Some((id, session)) = signed_in else {
        return Answer::see("/login");
    };
    if request.method == Method::POST {
        let carried = request.field("csrf").unwrap_or_default();
        if !sessions::same_token(carried, &session.csrf) {
            return refused(
                "the form was refused",
                "it did not carry this session's CSRF token, so it may not come from a page the console served you",
                "open the page again from the console and submit its form",
            );
        }
    }
    match (&request.method, request.path.as_str()) {
        (&Method::GET, "/") => Answer::see("/approvals"),
        (&Method::GET, "/approvals") => {
            page(approvals_page::show(console, &session, request).await)
        }
        (&Method::GET, "/operations") => {
            page(operations_page::show(console, &session, request).await)
        }
        (&Method::GET, "/outbox") => page(outbox_page::show(console, &session, request).await),
        (&Method::GET, "/audit") => page(audit_page::show(console, &session, request).await),
        (&Method::POST, "/approvals/decide") => {
            let flash = approvals_page::decide(console, &session, request).await;
            acted(console, id, &session, flash, "/approvals")
        }
        (&Method::POST, "/operations/settle") => {
            let flash = operations_page::settle(console, &session, request).await;
            acted(console, id, &session, flash, "/operations")
        }
        (&Method::POST, "/outbox/resume") => {
            let flash = outbox_page::resume(console, &session, request).await;
            acted(console, id, &session, flash, "/outbox")
        }
        (&Method::POST, "/logout") => {
            console.sessions.close(id);
            eprintln!(
                "signed out: {} of tenant {}",
                session.operator.subject(),
                session.operator.tenant()
            );
            Answer::see("/login").with_cookie(sessions::ended_session_cookie())
        }
        (_, "/" | "/approvals" | "/operations" | "/outbox" | "/audit") => Answer::plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "this page is read with GET; its forms post to their own paths",
        ),
        _ => {
            let missing = Flash::Failed {
                what: "no such page".to_owned(),
                why: "the console has the pages Approvals, Operations, Outbox and Audit trail"
                    .to_owned(),
                next: "follow the links at the top of a page".to_owned(),
            };
            Answer::page(StatusCode::NOT_FOUND, layout::refusal(&missing))
        }
    }
}

/// Whether a posted form comes from a page of this console: its `Origin`, when the browser
/// sends one, is the console's own (the SameSite=Strict cookie already keeps other sites'
/// forms from acting as the operator; this refuses them before anything else).
fn same_origin(request: &Request) -> bool {
    match (&request.origin, &request.host) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|origin| origin == host),
        (Some(_), None) => false,
    }
}

/// The sign-in page, with a new sign-in CSRF token in its cookie and its form.
fn login_page(request: &Request, refusal: Option<Flash>) -> Answer {
    let csrf = request
        .cookie(LOGIN_COOKIE)
        .filter(|c| c.len() == 43)
        .map_or_else(sessions::random_token, str::to_owned);
    let status = if refusal.is_some() {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::OK
    };
    Answer::page(status, layout::login(&csrf, refusal.as_ref()))
        .with_cookie(sessions::login_cookie(&csrf))
}

/// `POST /login`: a token proves an operator of the store's tenants, or the page says why not.
async fn log_in(console: &Console, request: &Request, now_ms: i64) -> Answer {
    let carried = request.field("csrf").unwrap_or_default();
    let expected = request.cookie(LOGIN_COOKIE).unwrap_or_default();
    if !sessions::same_token(carried, expected) {
        return refused(
            "the sign-in form was refused",
            "it did not carry the CSRF token of the sign-in page the console served this browser",
            "open the sign-in page again and sign in from it",
        );
    }
    let token = request.field("token").unwrap_or_default().trim();
    if token.is_empty() {
        let flash = Flash::Failed {
            what: "no token".into(),
            why: "the console signs in an operator with a token an issuer signed".into(),
            next: "paste the token `toolgate operators issue` printed for you".into(),
        };
        return login_page(request, Some(flash));
    }
    match sign_in(console.store(), token, now_ms).await {
        Ok(operator) => {
            eprintln!(
                "signed in: {} of tenant {} (issuer {})",
                operator.subject(),
                operator.tenant(),
                operator.issuer()
            );
            let id = console.sessions.open(operator, now_ms);
            Answer::see("/approvals").with_cookie(sessions::session_cookie(&id))
        }
        Err(failure) => {
            eprintln!("sign-in refused: {failure}");
            login_page(request, Some(super::failed(failure)))
        }
    }
}

/// A page, or the refusal of a store that failed.
fn page(rendered: Result<String, Failure>) -> Answer {
    match rendered {
        Ok(html) => Answer::page(StatusCode::OK, html),
        Err(failure) => {
            let status = match failure {
                Failure::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_REQUEST,
            };
            Answer::page(status, layout::refusal(&super::failed(failure)))
        }
    }
}

/// After an action: its outcome kept for the next page, which the browser is sent to.
fn acted(
    console: &Console,
    id: &str,
    session: &Session,
    flash: Flash,
    back: &'static str,
) -> Answer {
    let operator = &session.operator;
    match &flash {
        Flash::Done(text) => eprintln!(
            "{} of tenant {}: {}",
            operator.subject(),
            operator.tenant(),
            text.lines().next().unwrap_or_default()
        ),
        Flash::Failed { what, .. } => eprintln!(
            "{} of tenant {}: refused: {what}",
            operator.subject(),
            operator.tenant()
        ),
    }
    console.sessions.flash(id, flash);
    Answer::see(back)
}

fn refused(what: &str, why: &str, next: &str) -> Answer {
    let flash = Flash::Failed {
        what: what.to_owned(),
        why: why.to_owned(),
        next: next.to_owned(),
    };
    Answer::page(StatusCode::FORBIDDEN, layout::refusal(&flash))
}
