//! Operator tokens read and written by another JWT library: PyJWT (Debian's `python3-jwt`, with
//! `python3-cryptography` for EdDSA). A token `toolgate operators issue` prints verifies in
//! PyJWT with the issuer's public key, and a token PyJWT signs with the issuer's secret key is
//! accepted by `toolgate approvals approve`.
//!
//! The tests install both packages with apt-get when `/usr/bin/python3` cannot import them (CI
//! runs the tests as root on a fresh machine), and fail, saying why, when that fails: they never
//! skip.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use toolgate_core::store::prelude::*;

use crate::debian;
use crate::support::{HOUR_MS, Ran, approval, ask, now_ms, sqlite_file, toolgate, toolgate_as};

/// Debian's Python, whose packages apt-get installs.
const PYTHON: &str = "/usr/bin/python3";

/// The Debian packages of PyJWT and of its EdDSA backend.
const PACKAGES: [&str; 2] = ["python3-jwt", "python3-cryptography"];

/// Whether `/usr/bin/python3` imports PyJWT and cryptography.
fn importable() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import jwt, cryptography"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Makes sure PyJWT and cryptography import in `/usr/bin/python3`, installing them once per test
/// process when they do not (and reading the package lists first when the install cannot find
/// them). Panics, saying what to do, when they cannot be had.
fn pyjwt() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| debian::ensure(&PACKAGES, importable));
    if let Err(why) = ready {
        panic!(
            "the PyJWT interop tests need {PYTHON} with PyJWT and cryptography: {why}; install \
             them (`apt-get install -y {}`, as root) and run the tests again",
            PACKAGES.join(" ")
        );
    }
}

/// Runs `script` in `/usr/bin/python3` with `args`, answering its stdout; panics with its
/// stderr when it fails.
fn python(script: &str, args: &[&str]) -> String {
    pyjwt();
    let output = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stderr}");
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `operators init` for the issuer `acme-desk` of acme into `store`, its secret key into
/// `secret`.
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

/// Verifies `argv[2]` with the public JWK `argv[1]` (refusing any algorithm but EdDSA), and
/// prints its header and claims.
const VERIFY: &str = r#"
import json, sys, jwt
from jwt.algorithms import OKPAlgorithm
key = OKPAlgorithm.from_jwk(sys.argv[1])
token = sys.argv[2]
try:
    claims = jwt.decode(token, key, algorithms=["EdDSA"])
except jwt.InvalidSignatureError as err:
    print(json.dumps({"refused": str(err)}))
    sys.exit(0)
print(json.dumps({"header": jwt.get_unverified_header(token), "claims": claims}))
"#;

#[tokio::test]
async fn pyjwt_verifies_a_token_toolgate_issues() {
    let db = sqlite_file().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-desk.jwk");
    let ran = init(&db.arg, &secret);
    assert_eq!(ran.code, 0, "{ran:?}");
    // The public key as the store lists it.
    let ran = toolgate(
        &db.arg,
        &["operators", "list", "--tenant", "acme", "--json"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let desk = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["issuer"] == "acme-desk")
        .expect("the issuer is listed");
    let ran = toolgate(
        &db.arg,
        &[
            "operators",
            "issue",
            "--secret-file",
            secret.to_str().unwrap(),
            "--subject",
            "manager",
            "--permission",
            "refund:approve",
            "--lifetime",
            "1h",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let token = ran.stdout.trim_end();

    let verified = python(VERIFY, &[&desk["jwk"].to_string(), token]);
    let verified: serde_json::Value = serde_json::from_str(&verified).unwrap();
    assert_eq!(verified["header"]["alg"], "EdDSA", "{verified}");
    assert_eq!(verified["header"]["kid"], desk["kid"], "{verified}");
    let claims = &verified["claims"];
    assert_eq!(
        (&claims["iss"], &claims["sub"], &claims["tenant"]),
        (&"acme-desk".into(), &"manager".into(), &"acme".into()),
        "{verified}"
    );
    assert_eq!(claims["permissions"], serde_json::json!(["refund:approve"]));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );

    // PyJWT does check: the key of another issuer (acme-ops, the fixture's) refuses it.
    let other = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["issuer"] == "acme-ops")
        .expect("the fixture's issuer is listed");
    let refused = python(VERIFY, &[&other["jwk"].to_string(), token]);
    assert!(refused.contains("\"refused\""), "{refused}");
}

/// Signs, with the secret JWK in the file `argv[1]`, the claims of an operator token for the
/// subject `argv[2]` holding the permission `argv[3]`, valid for an hour; prints the token.
const SIGN: &str = r#"
import json, sys, time, jwt
from jwt.algorithms import OKPAlgorithm
jwk = json.load(open(sys.argv[1]))
key = OKPAlgorithm.from_jwk(json.dumps(jwk))
now = int(time.time())
claims = {
    "iss": jwk["iss"],
    "sub": sys.argv[2],
    "tenant": jwk["tenant"],
    "permissions": [sys.argv[3]],
    "iat": now,
    "exp": now + 3600,
}
print(jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": jwk["kid"]}))
"#;

#[tokio::test]
async fn toolgate_accepts_a_token_pyjwt_signs() {
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

    let secret = secret.to_str().unwrap();
    let token = python(SIGN, &[secret, "manager", "refund:approve"]);
    let args = ["approvals", "approve", "apr_a1", "--reason", "checked"];
    let ran = toolgate_as(&db.arg, token.trim_end(), &args);
    assert_eq!(ran.code, 0, "{ran:?}");
    let decided = db.store.approval("apr_a1").await.unwrap().unwrap();
    let decision = decided.last_decision().unwrap();
    assert_eq!(
        (decision.by.as_str(), decision.issuer.as_deref()),
        ("manager", Some("acme-desk"))
    );

    // What PyJWT signs for the requester is still refused self-approval.
    let ask_again = approval("apr_a2", "acme", "k2", now_ms() + HOUR_MS);
    ask(&db.store, &ask_again).await;
    let token = python(SIGN, &[secret, "agent", "refund:approve"]);
    let args = ["approvals", "approve", "apr_a2", "--reason", "mine"];
    let ran = toolgate_as(&db.arg, token.trim_end(), &args);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains("agent asked for approval apr_a2 and cannot decide on it"),
        "{ran:?}"
    );
}
