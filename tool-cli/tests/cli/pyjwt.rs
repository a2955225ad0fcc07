//! Operator tokens read by another JWT library: PyJWT (Debian's `python3-jwt`, with
//! `python3-cryptography` for EdDSA). A token `toolgate operators issue` prints verifies in
//! PyJWT with the issuer's public key.
//!
//! The tests install both packages with apt-get when `/usr/bin/python3` cannot import them (CI
//! runs the tests as root on a fresh machine), and fail, saying why, when that fails: they never
//! skip.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{Ran, sqlite_file, toolgate};

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

/// Runs `apt-get ARGS`, answering what it said when it failed.
fn apt_get(args: &[&str]) -> Result<(), String> {
    let output = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .map_err(|err| format!("apt-get {} did not run: {err}", args.join(" ")))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "apt-get {} failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// Makes sure PyJWT and cryptography import in `/usr/bin/python3`, installing them once per test
/// process when they do not (and reading the package lists first when the install cannot find
/// them). Panics, saying what to do, when they cannot be had.
fn pyjwt() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if importable() {
            return Ok(());
        }
        let install = [&["install", "-y"][..], &PACKAGES].concat();
        apt_get(&install).or_else(|_| apt_get(&["update"]).and_then(|()| apt_get(&install)))?;
        if importable() {
            Ok(())
        } else {
            Err(format!(
                "{PYTHON} still cannot import jwt and cryptography after apt-get"
            ))
        }
    });
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
