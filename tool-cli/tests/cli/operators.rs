//! `operators init | issue | list`, run as an operator runs them: an issuer made with its secret
//! key in a file of its own and its public key in the store, tokens issued with the secret key
//! and accepted by the commands that act, and every refusal.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use toolgate_core::identity::IssuerSecret;
use toolgate_core::store::prelude::*;

use crate::support::{
    HOUR_MS, Ran, all_audit, approval, ask, now_ms, sqlite_file, toolgate, toolgate_env,
};

/// Runs `operators init` for the issuer `acme-desk` of acme, its secret key into `secret`.
fn init(store: &str, secret: &Path) -> Ran {
    toolgate(
        store,
        &[
            "operators",
            "init",
            "--issuer",
            "acme-desk",
            "--tenant",
            "acme",
            "--secret-file",
            secret.to_str().unwrap(),
        ],
    )
}

/// Runs `operators issue` with the secret key in `secret` and `args`, with no store named.
fn issue(secret: &Path, args: &[&str]) -> Ran {
    let mut all = vec![
        "operators",
        "issue",
        "--secret-file",
        secret.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    toolgate_env(&all, &[])
}

/// The claims of `token`, read without checking it.
fn claims(token: &str) -> serde_json::Value {
    let claims = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64.decode(claims).unwrap()).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn init_issue_and_list_make_tokens_the_store_accepts() {
    let db = sqlite_file().await;
    ask(
        &db.store,
        &approval("apr_a1", "acme", "k1", now_ms() + HOUR_MS),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");

    let ran = init(&db.arg, &secret);
    assert_eq!(ran.code, 0, "{ran:?}");
    // The store holds the public key; the file holds its secret half, for its owner alone.
    let keys = db.store.issuer_keys("acme").await.unwrap();
    let key = keys
        .iter()
        .find(|key| key.issuer == "acme-desk")
        .expect("the new issuer's key is stored");
    let kid = key.kid();
    assert_eq!(mode(&secret), 0o600);
    let held = IssuerSecret::from_jwk(&std::fs::read_to_string(&secret).unwrap()).unwrap();
    assert_eq!(&held.public(), key);
    let shown = secret.display().to_string();
    for says in [
        kid.as_str(),
        shown.as_str(),
        &format!("toolgate operators issue --secret-file {shown} --subject"),
    ] {
        assert!(ran.stdout.contains(says), "{says:?} in {}", ran.stdout);
    }

    // Listed with the fixture's own issuer, acme-ops, in the order added.
    let ran = toolgate(&db.arg, &["operators", "list", "--tenant", "acme"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    assert!(lines[0].starts_with("KID "), "{}", ran.stdout);
    assert!(lines[0].ends_with("ISSUER"), "{}", ran.stdout);
    assert!(lines[1].ends_with("acme-ops"), "{}", ran.stdout);
    assert_eq!(lines[2], format!("{kid}  acme-desk"));
    let ran = toolgate(
        &db.arg,
        &["operators", "list", "--tenant", "acme", "--json"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed[1]["kid"], kid.as_str(), "{listed}");
    assert_eq!(listed[1]["issuer"], "acme-desk", "{listed}");
    assert_eq!(listed[1]["tenant"], "acme", "{listed}");
    assert_eq!(listed[1]["jwk"]["kty"], "OKP", "{listed}");
    assert!(listed[1]["jwk"].get("d").is_none(), "no secret: {listed}");
    let ran = toolgate(&db.arg, &["operators", "list", "--tenant", "globex"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "no issuer keys of tenant globex\n")
    );

    // A token, alone on stdout, with no store named; 8 hours unless told.
    let ran = issue(
        &secret,
        &[
            "--subject",
            "manager",
            "--permission",
            "refund:approve",
            "--permission",
            "ops:settle",
            "--lifetime",
            "30m",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stderr.is_empty(), "{ran:?}");
    let token = ran.stdout.strip_suffix('\n').expect("one line");
    assert!(!token.contains(char::is_whitespace), "{token:?}");
    let read = claims(token);
    assert_eq!(
        (&read["iss"], &read["sub"], &read["tenant"]),
        (&"acme-desk".into(), &"manager".into(), &"acme".into())
    );
    assert_eq!(
        read["permissions"],
        serde_json::json!(["refund:approve", "ops:settle"])
    );
    assert_eq!(
        read["exp"].as_i64().unwrap() - read["iat"].as_i64().unwrap(),
        1800
    );
    let ran = issue(
        &secret,
        &["--subject", "lead", "--permission", "refund:approve"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let read = claims(ran.stdout.trim_end());
    assert_eq!(
        read["exp"].as_i64().unwrap() - read["iat"].as_i64().unwrap(),
        8 * 3600
    );

    // The token printed is the approver.
    let ran = toolgate_env(
        &[
            "--store",
            &db.arg,
            "approvals",
            "approve",
            "apr_a1",
            "--reason",
            "checked",
        ],
        &[("TOOLGATE_TOKEN", token)],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let decided = db.store.approval("apr_a1").await.unwrap().unwrap();
    let decision = decided.last_decision().unwrap();
    assert_eq!(
        (decision.by.as_str(), decision.issuer.as_deref()),
        ("manager", Some("acme-desk"))
    );
}

#[tokio::test]
async fn init_never_overwrites_a_key_file() {
    let db = sqlite_file().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");
    std::fs::write(&secret, "the key of last year\n").unwrap();
    let before = db.store.issuer_keys("acme").await.unwrap();

    let ran = init(&db.arg, &secret);
    assert_eq!(ran.code, 1, "{ran:?}");
    let shown = secret.display().to_string();
    for says in [
        &format!("the secret file {shown} exists"),
        "never overwritten",
        "--secret-file",
    ] {
        assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "the key of last year\n"
    );
    assert_eq!(db.store.issuer_keys("acme").await.unwrap(), before);
}

#[tokio::test]
async fn init_refuses_a_name_that_is_not_an_identifier_and_writes_nothing() {
    let db = sqlite_file().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("key.jwk");
    for (issuer, tenant) in [("acme desk", "acme"), ("acme-desk", "acme\u{200b}")] {
        let ran = toolgate(
            &db.arg,
            &[
                "operators",
                "init",
                "--issuer",
                issuer,
                "--tenant",
                tenant,
                "--secret-file",
                secret.to_str().unwrap(),
            ],
        );
        assert_eq!(ran.code, 2, "{ran:?}");
        assert!(ran.stderr.contains("is not an identifier"), "{ran:?}");
        assert!(!secret.exists(), "{issuer:?} {tenant:?}");
    }
    assert_eq!(db.store.issuer_keys("acme").await.unwrap().len(), 1);
    // With no store, nothing is written either.
    let ran = toolgate(
        &format!("sqlite:{}", dir.path().join("missing.db").display()),
        &[
            "operators",
            "init",
            "--issuer",
            "acme-desk",
            "--tenant",
            "acme",
            "--secret-file",
            secret.to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 3, "{ran:?}");
    assert!(!secret.exists());
}

#[tokio::test]
async fn issue_refuses_a_secret_file_group_or_others_can_read() {
    let db = sqlite_file().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");
    assert_eq!(init(&db.arg, &secret).code, 0);
    let shown = secret.display().to_string();
    for open in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(open)).unwrap();
        let ran = issue(
            &secret,
            &["--subject", "manager", "--permission", "refund:approve"],
        );
        assert_eq!(ran.code, 1, "{open:o}: {ran:?}");
        assert!(ran.stdout.is_empty(), "no token: {ran:?}");
        for says in [&format!("{open:o}"), &format!("chmod 600 {shown}")] {
            assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
        }
    }
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).unwrap();
    let ran = issue(
        &secret,
        &["--subject", "manager", "--permission", "refund:approve"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");

    // A file that is not a secret key, or none.
    let public = dir.path().join("public.jwk");
    let key = &db.store.issuer_keys("acme").await.unwrap()[0];
    std::fs::write(&public, key.to_jwk()).unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ran = issue(
        &public,
        &["--subject", "manager", "--permission", "refund:approve"],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("the secret key file"), "{ran:?}");
    let ran = issue(
        &dir.path().join("nowhere.jwk"),
        &["--subject", "manager", "--permission", "refund:approve"],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("toolgate operators init"), "{ran:?}");
}

#[tokio::test]
async fn issue_refuses_a_subject_or_permission_that_is_not_an_identifier() {
    let db = sqlite_file().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");
    assert_eq!(init(&db.arg, &secret).code, 0);
    for (subject, permission, says) in [
        (
            "agent ",
            "refund:approve",
            "the token's subject \"agent \" is not an identifier",
        ),
        (
            "agent\u{200b}",
            "refund:approve",
            "the token's subject \"agent\\u{200b}\" is not an identifier",
        ),
        ("\u{feff}agent", "refund:approve", "is not an identifier"),
        (
            "manager",
            "refund:approve\u{200b}",
            "the token's permission",
        ),
        ("", "refund:approve", "is not an identifier"),
    ] {
        let ran = issue(&secret, &["--subject", subject, "--permission", permission]);
        assert_eq!(ran.code, 2, "{subject:?}: {ran:?}");
        assert!(ran.stdout.is_empty(), "no token: {ran:?}");
        assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
    }
    assert!(all_audit(&db.store).await.is_empty());
}

#[test]
fn issue_takes_a_lifetime_in_minutes_hours_or_days_and_refuses_zero_or_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");
    // `issue` needs no store: the key file made by the library, as `init` writes it.
    let made = IssuerSecret::generate("acme-desk", "acme").unwrap();
    std::fs::write(&secret, made.to_jwk()).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let base = [
        "--subject",
        "manager",
        "--permission",
        "refund:approve",
        "--lifetime",
    ];
    for (lifetime, seconds) in [("45s", 45), ("30m", 1800), ("8h", 28_800), ("7d", 604_800)] {
        let ran = issue(&secret, &[&base[..], &[lifetime]].concat());
        assert_eq!(ran.code, 0, "{lifetime}: {ran:?}");
        let read = claims(ran.stdout.trim_end());
        let lasts = read["exp"].as_i64().unwrap() - read["iat"].as_i64().unwrap();
        assert_eq!(lasts, seconds, "{lifetime}");
    }
    for lifetime in ["0", "0h", "8", "8x", "h", "91d", "100000000000000d", "1.5h"] {
        let ran = issue(&secret, &[&base[..], &[lifetime]].concat());
        assert_eq!(ran.code, 2, "{lifetime}: {ran:?}");
        assert!(ran.stdout.is_empty(), "{lifetime}: {ran:?}");
        assert!(
            ran.stderr.contains("--lifetime"),
            "{lifetime}: {}",
            ran.stderr
        );
    }
}
