//! What the command line's tests share: approvals and operations prepared through the store
//! API, issuers of operator tokens, and the `toolgate` binary run as an operator runs it.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::Value;
use toolgate_core::identity::IssuerSecret;
use toolgate_store_sqlite::SqliteStore;

use toolgate_core::store::EventSettlement;

use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, AttemptError, AttemptFailure, AuditEntry, AuditKind,
    AuditQuery, AuditRecord, Begun, Claim, ClaimRequest, ClaimToken, Commit, DeliveryOutcome,
    EventLease, NewEvent, OperationStore, OutboxEvent, Requester, Success,
};

/// Now by the system clock, as the binary reads it.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// One hour, in milliseconds.
pub(crate) const HOUR_MS: i64 = 3_600_000;

/// A pending approval of a refund of 8000.00 asked by `agent` in `tenant`, expiring at
/// `expires_ms`, under the key `key`.
pub(crate) fn approval(id: &str, tenant: &str, key: &str, expires_ms: i64) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: tenant.into(),
        key: key.into(),
        tool: "issue_refund".into(),
        request_hash: format!("hash-{key}"),
        policy_hash: "policy-1".into(),
        arguments: r#"{"amount":"8000.00","card_number":"[redacted]","order_id":"ORD-1002"}"#
            .into(),
        amount: "8000.00".into(),
        threshold: "5000".into(),
        requester: Requester {
            user: "agent".into(),
            permissions: vec!["refund:create".into()],
        },
        run_id: "run-1".into(),
        call_id: "call_1".into(),
        approver_permission: "refund:approve".into(),
        created_ms: expires_ms - HOUR_MS,
        expires_ms,
        status: ApprovalStatus::Pending,
        decisions: Vec::new(),
    }
}

/// Stores `approval` as the dispatcher does: a claim of its key that carries it.
pub(crate) async fn ask(store: &dyn OperationStore, approval: &ApprovalRecord) {
    let claim = store
        .claim(ClaimRequest {
            tenant: &approval.tenant,
            key: &approval.key,
            tool: &approval.tool,
            request_hash: &approval.request_hash,
            unkeyed: None,
            arguments: &approval.arguments,
            now_ms: approval.created_ms,
            lease: Duration::from_secs(30),
            takeover: false,
            approval: Some(approval),
        })
        .await
        .unwrap();
    assert!(matches!(claim, Claim::Approval(_)), "{claim:?}");
}

/// The claim of a refund under `key` in `tenant` that a call makes now.
pub(crate) fn refund_claim<'a>(tenant: &'a str, key: &'a str, hash: &'a str) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant,
        key,
        tool: "issue_refund",
        request_hash: hash,
        unkeyed: None,
        arguments: r#"{"amount":"80.00","order_id":"ORD-1001"}"#,
        now_ms: now_ms(),
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

/// A refund under the new `key` in `tenant`, claimed: the claim's token.
async fn acquired(store: &dyn OperationStore, tenant: &str, key: &str) -> ClaimToken {
    let hash = format!("hash-{key}");
    let claim = store.claim(refund_claim(tenant, key, &hash)).await.unwrap();
    let Claim::Acquired { attempt, .. } = claim else {
        panic!("a new key is acquired: {claim:?}");
    };
    ClaimToken {
        tenant: tenant.into(),
        key: key.into(),
        attempt,
    }
}

/// A write of `tool` under `key` in `tenant` that ran and succeeded with `result`.
pub(crate) async fn succeeded(store: &dyn OperationStore, tenant: &str, key: &str, result: &str) {
    let now = now_ms();
    let owner = acquired(store, tenant, key).await;
    store
        .succeed(Success {
            owner: &owner,
            result,
            now_ms: now,
            audit: None,
        })
        .await
        .unwrap();
}

/// A refund under `key` in `tenant` whose attempt timed out after it may have reached the
/// provider: `outcome_unknown`.
pub(crate) async fn unknown(store: &dyn OperationStore, tenant: &str, key: &str) {
    let owner = acquired(store, tenant, key).await;
    let error = AttemptError {
        attempt: owner.attempt,
        kind: "timeout".into(),
        what: "the payment provider did not answer in 5s".into(),
    };
    store
        .mark_unknown(AttemptFailure {
            owner: &owner,
            error: &error,
            now_ms: now_ms(),
        })
        .await
        .unwrap();
}

/// An outbox refund under `key` in `tenant`, committed with its event, whose delivery was leased
/// and dead-lettered after a 503: the event as the store answers it after.
pub(crate) async fn dead_event(store: &dyn OperationStore, tenant: &str, key: &str) -> OutboxEvent {
    let now = now_ms();
    let begun = store
        .begin(ClaimRequest {
            tenant,
            key,
            tool: "issue_refund",
            request_hash: &format!("hash-{key}"),
            unkeyed: None,
            arguments: r#"{"amount":50,"order_id":"ORD-1001"}"#,
            now_ms: now,
            lease: Duration::from_secs(30),
            takeover: false,
            approval: None,
        })
        .await
        .unwrap();
    let Begun::Open { tx, attempt, .. } = begun else {
        panic!("a new key is claimed in a transaction: {begun:?}");
    };
    let owner = ClaimToken {
        tenant: tenant.into(),
        key: key.into(),
        attempt,
    };
    let event = NewEvent {
        payload: r#"{"order_id":"ORD-1001","amount_cents":5000}"#.into(),
    };
    tx.commit(Commit {
        owner: &owner,
        result: r#"{"order_id":"ORD-1001","amount":"50.00"}"#,
        event: Some(&event),
        now_ms: now,
    })
    .await
    .unwrap();
    let leased = store
        .lease_events(EventLease {
            worker: "w1",
            tools: &["issue_refund"],
            now_ms: now,
            lease: Duration::from_secs(30),
            limit: 16,
        })
        .await
        .unwrap();
    let leased = leased
        .into_iter()
        .find(|l| l.event.tenant == tenant && l.event.key == key)
        .expect("the event is leased");
    let error = AttemptError {
        attempt: leased.event.attempt,
        kind: "unavailable".into(),
        what: "the payment provider answered 503".into(),
    };
    store
        .settle_event(EventSettlement {
            tenant,
            key,
            attempt: leased.event.attempt,
            outcome: DeliveryOutcome::Dead(&error),
            now_ms: now,
            audit: None,
        })
        .await
        .unwrap()
}

/// The audit record of a call of `tool` in `run` of `tenant`.
pub(crate) fn call_entry(
    tenant: &str,
    run: &str,
    call: &str,
    tool: &str,
    key: Option<&str>,
) -> AuditEntry {
    AuditEntry {
        kind: AuditKind::Call,
        tenant: tenant.into(),
        run_id: run.into(),
        call_id: call.into(),
        tool: tool.into(),
        actor: "agent".into(),
        arguments: r#"{"order_id":"ORD-1001"}"#.into(),
        attempts: 1,
        duration_ms: 12,
        outcome: "succeeded".into(),
        error_kind: None,
        replayed: false,
        bytes: 42,
        key: key.map(str::to_owned),
        approval_id: None,
        reason: None,
        at_ms: now_ms(),
    }
}

/// What a run of the binary did.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its exit code.
    pub(crate) code: i32,
    /// What it printed on stdout.
    pub(crate) stdout: String,
    /// What it printed on stderr.
    pub(crate) stderr: String,
}

/// Runs `toolgate` with `args` and the environment `env`, and nothing else of this process's
/// `TOOLGATE_*` variables.
pub(crate) fn toolgate_env(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .args(args)
        .env_remove("TOOLGATE_STORE")
        .env_remove("TOOLGATE_TOKEN");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("the binary runs");
    Ran {
        code: output.status.code().expect("an exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs `toolgate --store STORE` with `args`.
pub(crate) fn toolgate(store: &str, args: &[&str]) -> Ran {
    let mut all = vec!["--store", store];
    all.extend_from_slice(args);
    toolgate_env(&all, &[])
}

/// Runs `toolgate --store STORE` with `args` and `--token TOKEN`.
pub(crate) fn toolgate_as(store: &str, token: &str, args: &[&str]) -> Ran {
    let mut all = args.to_vec();
    all.extend(["--token", token]);
    toolgate(store, &all)
}

/// An issuer of operator tokens, its secret key held by the test.
pub(crate) struct Issuer {
    /// Its secret key.
    pub(crate) secret: IssuerSecret,
}

impl Issuer {
    /// A new issuer `name` of `tenant`, whose public key `store` holds, as `toolgate operators
    /// init` leaves it.
    pub(crate) async fn added(store: &dyn OperationStore, name: &str, tenant: &str) -> Issuer {
        let issuer = Issuer::unknown(name, tenant);
        let added = store
            .add_issuer_key(&issuer.secret.public(), now_ms())
            .await
            .unwrap();
        assert!(added, "a new key is added");
        issuer
    }

    /// A new issuer `name` of `tenant` whose key no store holds.
    pub(crate) fn unknown(name: &str, tenant: &str) -> Issuer {
        Issuer {
            secret: IssuerSecret::generate(name, tenant).unwrap(),
        }
    }

    /// A token for `subject` holding `permissions`, valid for an hour from now.
    pub(crate) fn token(&self, subject: &str, permissions: &[&str]) -> String {
        self.token_at(subject, permissions, now_ms())
    }

    /// A token for `subject` holding `permissions`, issued at `issued_ms` for an hour.
    pub(crate) fn token_at(&self, subject: &str, permissions: &[&str], issued_ms: i64) -> String {
        let hour = Duration::from_millis(HOUR_MS.unsigned_abs());
        self.secret
            .issue(subject, permissions, hour, issued_ms)
            .unwrap()
    }

    /// A token of `claims` (its issuer's and tenant's added when absent, valid for an hour from
    /// now when `exp` is absent), signed with this issuer's key as no library of toolgate's
    /// would sign it: a subject that is not an identifier, a tenant not its key's.
    pub(crate) fn hand_signed(&self, claims: Value) -> String {
        let key = self.secret.public();
        let now = now_ms() / 1000;
        let mut claims = claims;
        let fields = claims.as_object_mut().expect("claims are an object");
        for (name, value) in [
            ("iss", Value::from(key.issuer.clone())),
            ("tenant", Value::from(key.tenant.clone())),
            ("permissions", Value::Array(Vec::new())),
            ("iat", Value::from(now)),
            ("exp", Value::from(now + HOUR_MS / 1000)),
        ] {
            fields.entry(name).or_insert(value);
        }
        let header = serde_json::json!({"alg": "EdDSA", "typ": "JWT", "kid": key.kid()});
        let signed = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let jwk: Value = serde_json::from_str(&self.secret.to_jwk()).unwrap();
        let seed: [u8; 32] = B64
            .decode(jwk["d"].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        let signature = SigningKey::from_bytes(&seed).sign(signed.as_bytes());
        format!("{signed}.{}", B64.encode(signature.to_bytes()))
    }
}

/// `token` with its claims changed by `change` after it was signed, its signature kept.
pub(crate) fn edited(token: &str, change: impl FnOnce(&mut Value)) -> String {
    let [header, claims, signature]: [&str; 3] =
        token.split('.').collect::<Vec<_>>().try_into().unwrap();
    let mut claims: Value = serde_json::from_slice(&B64.decode(claims).unwrap()).unwrap();
    change(&mut claims);
    format!("{header}.{}.{signature}", B64.encode(claims.to_string()))
}

/// A SQLite store in a file of its own, the `--store` argument naming it, and acme's issuer of
/// operator tokens, whose public key it holds.
pub(crate) struct SqliteFile {
    /// The store, opened by the test.
    pub(crate) store: SqliteStore,
    /// `sqlite:PATH`.
    pub(crate) arg: String,
    /// The issuer `acme-ops` of the tenant acme.
    pub(crate) acme: Issuer,
    _dir: tempfile::TempDir,
}

/// A new SQLite store in a temporary directory, holding the key of acme's issuer `acme-ops`.
pub(crate) async fn sqlite_file() -> SqliteFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let acme = Issuer::added(&store, "acme-ops", "acme").await;
    SqliteFile {
        store,
        arg: format!("sqlite:{}", path.display()),
        acme,
        _dir: dir,
    }
}

/// Every record of the audit trail, each an operator's (kind `operator`), as (actor, key,
/// outcome, reason), in the order appended.
pub(crate) async fn operator_trail(
    store: &dyn OperationStore,
) -> Vec<(String, String, String, String)> {
    all_audit(store)
        .await
        .into_iter()
        .map(|record| {
            assert_eq!(record.entry.kind, AuditKind::Operator, "{record:?}");
            let entry = record.entry;
            (
                entry.actor,
                entry.key.unwrap_or_default(),
                entry.outcome,
                entry.reason.unwrap_or_default(),
            )
        })
        .collect()
}

/// Every audit record of the store, in order.
pub(crate) async fn all_audit(store: &dyn OperationStore) -> Vec<AuditRecord> {
    store.audit(AuditQuery::default()).await.unwrap()
}
