//! `toolgate console` over HTTP, as a browser speaks to it: signing in with tokens (and every
//! refused one), the tenant's pages, the forms' CSRF tokens and origin, escaping, and the
//! decisions, settlements and resumes it makes, stored and audited with the token's subject.

use std::time::Duration;

use toolgate_core::identity::IssuerSecret;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{ApprovalStatus, AuditKind, EventStatus, OperationState};

use crate::support::{
    HOUR_MS, SqliteFile, all_audit, approval, ask, dead_event, now_ms, operator_trail, sqlite_file,
    unknown,
};
use crate::web::{Client, ConsoleProcess, csrf_of, issuer, token};

/// A store with one approval of acme waiting (`apr_c1`, 8000.00, asked by `agent`), one of
/// globex (`apr_g1`), and acme's issuer `acme-ops`.
async fn desk() -> (SqliteFile, IssuerSecret) {
    let db = sqlite_file().await;
    let later = now_ms() + HOUR_MS;
    ask(&db.store, &approval("apr_c1", "acme", "k1", later)).await;
    ask(&db.store, &approval("apr_g1", "globex", "k9", later)).await;
    let acme = issuer(&db.store, "acme-ops", "acme").await;
    (db, acme)
}

/// A client signed in to `console` with `token`.
async fn signed_in(console: &ConsoleProcess, token: &str) -> Client {
    let mut client = Client::new(&console.addr);
    let reply = client.sign_in(token).await;
    assert_eq!(
        (reply.status, reply.location.as_deref()),
        (303, Some("/approvals")),
        "{reply:?}"
    );
    client
}

#[tokio::test]
async fn a_token_signs_in_to_its_tenants_queue_in_an_httponly_samesite_session() {
    let (db, acme) = desk().await;
    let console = ConsoleProcess::start(&db.arg);
    let mut client = Client::new(&console.addr);

    // Signed out, every page sends the browser to sign in.
    for page in [
        "/",
        "/approvals",
        "/operations",
        "/outbox",
        "/audit?run=run-1",
    ] {
        let reply = client.get(page).await;
        assert_eq!(
            (reply.status, reply.location.as_deref()),
            (303, Some("/login")),
            "{page}"
        );
    }

    let manager = token(&acme, "manager", &["refund:approve"]);
    let reply = client.sign_in(&manager).await;
    assert_eq!(reply.status, 303, "{reply:?}");
    let session = reply
        .cookies
        .iter()
        .find(|c| c.starts_with("toolgate_session="))
        .expect("a session cookie");
    assert!(
        session.ends_with("; Path=/; HttpOnly; SameSite=Strict"),
        "{session}"
    );

    let queue = client.get("/approvals").await;
    assert_eq!(queue.status, 200);
    for shown in [
        "apr_c1",
        "8000.00",
        "5000",
        "agent",
        "run-1",
        "[redacted]",
        "manager",
        "acme-ops",
    ] {
        assert!(queue.body.contains(shown), "{shown} in {}", queue.body);
    }
    assert!(
        !queue.body.contains("apr_g1"),
        "another tenant's approval is not shown"
    );
    let csp = queue.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(queue.headers["cache-control"], "no-store");
}

#[tokio::test]
async fn an_expired_foreign_key_or_other_tenant_token_is_refused_at_sign_in() {
    let (db, acme) = desk().await;
    let globex = issuer(&db.store, "globex-ops", "globex").await;
    let console = ConsoleProcess::start(&db.arg);
    let two_hours_ago = now_ms() - 2 * HOUR_MS;
    let expired = acme
        .issue(
            "manager",
            &["refund:approve"],
            Duration::from_secs(3600),
            two_hours_ago,
        )
        .unwrap();
    // Same issuer name and tenant, another key pair: the store does not hold its key.
    let stranger = IssuerSecret::generate("acme-ops", "acme").unwrap();
    let foreign = token(&stranger, "manager", &["refund:approve"]);
    // An issuer the store holds no key of at all.
    let initech = IssuerSecret::generate("initech-ops", "initech").unwrap();
    let unknown_tenant = token(&initech, "manager", &["refund:approve"]);
    for (token, says) in [
        (expired.as_str(), "expired"),
        (foreign.as_str(), "not signed by a known issuer key"),
        (unknown_tenant.as_str(), "not signed by a known issuer key"),
        ("not-a-token", "not an operator token"),
    ] {
        let mut client = Client::new(&console.addr);
        let reply = client.sign_in(token).await;
        assert_eq!(reply.status, 403, "{says}: {reply:?}");
        assert!(reply.body.contains(says), "{says} in {}", reply.body);
        assert!(
            reply
                .cookies
                .iter()
                .all(|c| !c.starts_with("toolgate_session"))
        );
        assert_eq!(
            client.get("/approvals").await.location.as_deref(),
            Some("/login")
        );
    }

    // A token of globex's own key proves a globex operator, who sees and decides only globex's.
    let mut other = signed_in(&console, &token(&globex, "boss", &["refund:approve"])).await;
    let queue = other.get("/approvals").await;
    assert!(queue.body.contains("apr_g1") && !queue.body.contains("apr_c1"));
    let csrf = csrf_of(&queue.body);
    other
        .post(
            "/approvals/decide",
            &[
                ("csrf", &csrf),
                ("id", "apr_c1"),
                ("verdict", "approve"),
                ("reason", "mine now"),
            ],
        )
        .await;
    let page = other.get("/approvals").await;
    assert!(
        page.body.contains("could not approve approval apr_c1"),
        "{}",
        page.body
    );
    let waiting = db.store.approval("apr_c1").await.unwrap().unwrap();
    assert_eq!(waiting.status, ApprovalStatus::Pending);
}

#[tokio::test]
async fn a_form_without_its_csrf_token_or_from_another_origin_is_refused() {
    let (db, acme) = desk().await;
    let console = ConsoleProcess::start(&db.arg);

    // The sign-in form too: without the token of the page the console served, no session.
    let mut client = Client::new(&console.addr);
    let manager = token(&acme, "manager", &["refund:approve"]);
    let reply = client.post("/login", &[("token", &manager)]).await;
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(reply.body.contains("CSRF"), "{}", reply.body);

    let mut client = signed_in(&console, &manager).await;
    let csrf = csrf_of(&client.get("/approvals").await.body);
    let decide = |csrf: &'static str| {
        [
            ("csrf", csrf),
            ("id", "apr_c1"),
            ("verdict", "approve"),
            ("reason", "fine"),
        ]
    };
    for form in [&decide("")[1..], &decide("forged")[..]] {
        let reply = client.post("/approvals/decide", form).await;
        assert_eq!(reply.status, 403, "{reply:?}");
        assert!(reply.body.contains("CSRF token"), "{}", reply.body);
    }
    let form = [
        ("csrf", csrf.as_str()),
        ("id", "apr_c1"),
        ("verdict", "approve"),
        ("reason", "fine"),
    ];
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let cross = client
        .send(
            "POST",
            "/approvals/decide",
            Some(body),
            &[("origin", "http://evil.example")],
        )
        .await;
    assert_eq!(cross.status, 403, "{cross:?}");
    assert!(cross.body.contains("another site"), "{}", cross.body);
    let waiting = db.store.approval("apr_c1").await.unwrap().unwrap();
    assert_eq!(
        waiting.status,
        ApprovalStatus::Pending,
        "nothing was decided"
    );

    // A page of another name that resolves to loopback is not answered.
    let rebound = client
        .send("GET", "/approvals", None, &[("host", "evil.example")])
        .await;
    assert_eq!(rebound.status, 421, "{rebound:?}");

    // With its token, from its own page, the same form decides.
    let reply = client.post("/approvals/decide", &form).await;
    assert_eq!(
        (reply.status, reply.location.as_deref()),
        (303, Some("/approvals"))
    );
    let decided = db.store.approval("apr_c1").await.unwrap().unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
}

#[tokio::test]
async fn a_decision_records_the_tokens_subject_and_issuer_and_the_requester_is_refused() {
    let (db, acme) = desk().await;
    let console = ConsoleProcess::start(&db.arg);

    // The requester holds the approval permission too, and is still refused its own request.
    let mut agent = signed_in(&console, &token(&acme, "agent", &["refund:approve"])).await;
    let csrf = csrf_of(&agent.get("/approvals").await.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("id", "apr_c1"),
        ("verdict", "approve"),
        ("reason", "mine"),
    ];
    agent.post("/approvals/decide", &form).await;
    let page = agent.get("/approvals").await;
    assert!(
        page.body.contains("could not approve approval apr_c1"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("agent asked for approval apr_c1"),
        "{}",
        page.body
    );
    let waiting = db.store.approval("apr_c1").await.unwrap().unwrap();
    assert_eq!(
        (waiting.status, waiting.decisions.len()),
        (ApprovalStatus::Pending, 0)
    );

    let mut manager = signed_in(&console, &token(&acme, "manager", &["refund:approve"])).await;
    let csrf = csrf_of(&manager.get("/approvals").await.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("id", "apr_c1"),
        ("verdict", "reject"),
        ("reason", "<b>no</b>"),
    ];
    manager.post("/approvals/decide", &form).await;
    let page = manager.get("/approvals").await;
    assert!(page.body.contains("rejected by manager"), "{}", page.body);
    let rejected = db.store.approval("apr_c1").await.unwrap().unwrap();
    let decision = rejected.last_decision().unwrap();
    assert_eq!(
        (
            rejected.status,
            decision.by.as_str(),
            decision.issuer.as_deref()
        ),
        (ApprovalStatus::Rejected, "manager", Some("acme-ops"))
    );
    let decisions: Vec<_> = all_audit(&db.store)
        .await
        .into_iter()
        .filter(|r| r.entry.kind == AuditKind::Decision)
        .map(|r| (r.entry.actor, r.entry.outcome))
        .collect();
    // The refused self-approval is kept too.
    let expected =
        [("agent", "refused"), ("manager", "rejected")].map(|(a, o)| (a.to_owned(), o.to_owned()));
    assert_eq!(decisions, expected);
    // The reason an operator typed is text on the page.
    let all = manager.get("/approvals?status=all").await;
    assert!(all.body.contains("&lt;b&gt;no&lt;/b&gt;") && !all.body.contains("<b>no"));
}

#[tokio::test]
async fn settle_and_resume_from_the_console_are_audited_with_the_tokens_subject() {
    let db = sqlite_file().await;
    unknown(&db.store, "acme", "k-unknown").await;
    dead_event(&db.store, "acme", "k-dead").await;
    let acme = issuer(&db.store, "acme-ops", "acme").await;
    let console = ConsoleProcess::start(&db.arg);
    let mut ops = signed_in(
        &console,
        &token(&acme, "night-ops", &["ops:settle", "outbox:resume"]),
    )
    .await;

    let page = ops.get("/operations").await;
    assert!(page.body.contains("k-unknown") && page.body.contains("outcome_unknown"));
    let csrf = csrf_of(&page.body);
    let settle = [
        ("csrf", csrf.as_str()),
        ("key", "k-unknown"),
        ("outcome", "applied"),
        ("evidence", "ledger shows re_123"),
    ];
    ops.post("/operations/settle", &settle).await;
    let after = ops.get("/operations?status=succeeded").await;
    assert!(
        after.body.contains("settled as applied by night-ops"),
        "{}",
        after.body
    );
    let record = db.store.get("acme", "k-unknown").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);

    let page = ops.get("/outbox").await;
    assert!(page.body.contains("k-dead") && page.body.contains("dead"));
    let resume = [
        ("csrf", csrf.as_str()),
        ("key", "k-dead"),
        ("reason", "provider is back"),
    ];
    ops.post("/outbox/resume", &resume).await;
    let event = db.store.event("acme", "k-dead").await.unwrap().unwrap();
    assert_eq!(event.status, EventStatus::Pending);

    let trail = operator_trail(&db.store).await;
    let actors: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|(actor, key, outcome, _)| (actor.as_str(), key.as_str(), outcome.as_str()))
        .collect();
    assert_eq!(
        actors,
        [
            ("night-ops", "k-unknown", "settled"),
            ("night-ops", "k-dead", "resumed")
        ]
    );
    assert!(trail[0].3.contains("ledger shows re_123"), "{trail:?}");

    // The audit trail page finds both by key.
    let found = ops.get("/audit?key=k-unknown").await;
    assert!(
        found.body.contains("night-ops") && found.body.contains("settled"),
        "{}",
        found.body
    );
    assert!(found.body.contains(r#"http-equiv="refresh""#));
}

#[tokio::test]
async fn what_a_model_wrote_is_shown_as_text() {
    let db = sqlite_file().await;
    let mut hostile = approval("apr_x1", "acme", "k1", now_ms() + HOUR_MS);
    hostile.arguments =
        r#"{"amount":"8000.00","note":"<script>alert('owned')</script>","order_id":"ORD-1002"}"#
            .into();
    hostile.run_id = r#"run"><img src=x>"#.into();
    ask(&db.store, &hostile).await;
    let acme = issuer(&db.store, "acme-ops", "acme").await;
    let console = ConsoleProcess::start(&db.arg);
    let mut client = signed_in(&console, &token(&acme, "manager", &["refund:approve"])).await;
    let page = client.get("/approvals").await.body;
    assert!(
        page.contains("&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        !page.contains("<script") && !page.contains("<img"),
        "{page}"
    );
    assert!(
        page.contains("/audit?run=run%22%3E%3Cimg+src%3Dx%3E"),
        "{page}"
    );
}

#[tokio::test]
async fn signing_out_ends_the_session_and_ctrl_c_stops_the_console() {
    let (db, acme) = desk().await;
    let console = ConsoleProcess::start(&db.arg);
    let mut client = signed_in(&console, &token(&acme, "manager", &["refund:approve"])).await;
    let csrf = csrf_of(&client.get("/approvals").await.body);
    let out = client.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.location.as_deref(), Some("/login"));
    assert_eq!(
        client.get("/approvals").await.location.as_deref(),
        Some("/login")
    );

    let (status, printed) = console.interrupt();
    assert!(status.success(), "{status:?}");
    assert!(printed.contains("toolgate console stopped"), "{printed}");
}

#[tokio::test]
async fn the_console_says_whether_it_listens_on_loopback() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let db = sqlite_file().await;
    for (listen, says) in [
        (
            "127.0.0.1:0",
            "it listens on loopback: only this machine reaches it",
        ),
        ("0.0.0.0:0", "it listens beyond loopback"),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["console", "--store", &db.arg, "--listen", listen])
            .env_remove("TOOLGATE_STORE")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut first, mut second) = (String::new(), String::new());
        out.read_line(&mut first).unwrap();
        out.read_line(&mut second).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(first.starts_with("toolgate console on http://"), "{first}");
        assert!(second.contains(says), "{listen}: {second}");
    }
}
