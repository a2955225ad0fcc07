//! Signing an operator in: a token an issuer signed, checked against the issuer keys the store
//! holds for the tenant the token claims. Every command that acts, and the console's sign-in page,
//! sign their operator in here.

use toolgate_core::identity::{IdentityError, Operator, TokenVerifier};
use toolgate_core::store::OperationStore;

use crate::error::Failure;
use crate::time::rfc3339;

/// The operator `token` proves at `now_ms`, or why it is refused: a token that does not read,
/// is unsigned, was signed by a key the store does not hold for its tenant (another key, another
/// tenant's, or changed since), or expired.
pub(crate) async fn sign_in(
    store: &dyn OperationStore,
    token: &str,
    now_ms: i64,
) -> Result<Operator, Failure> {
    let tenant = TokenVerifier::claimed_tenant(token).map_err(|err| refused(&err, None))?;
    let keys = store
        .issuer_keys(&tenant)
        .await
        .map_err(|e| Failure::store(&format!("read the issuer keys of tenant {tenant}"), &e))?;
    Operator::authenticate(&TokenVerifier::new(keys), token, now_ms)
        .map_err(|err| refused(&err, Some(&tenant)))
}

/// The refusal of a token for `err`, the token claiming `tenant` when it reads that far: what to
/// do names the commands that help.
fn refused(err: &IdentityError, tenant: Option<&str>) -> Failure {
    let why = match err {
        IdentityError::Expired { exp } => {
            format!("the token expired at {}", rfc3339(exp.saturating_mul(1000)))
        }
        err => err.to_string(),
    };
    let next = match (err, tenant) {
        (IdentityError::Expired { .. }, _) => {
            "ask whoever holds your issuer's key for a new token (`toolgate operators issue`)"
                .to_owned()
        }
        (IdentityError::ForeignKey(_), Some(tenant)) => format!(
            "use a token issued with a key this store holds for tenant {tenant} (`toolgate operators list --tenant {tenant}` lists them; `toolgate operators init` adds one)"
        ),
        (err, _) => err.next().to_owned(),
    };
    Failure::refused("the operator token is refused", why, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_what_to_do_in_the_command_lines_words() {
        let expired = refused(&IdentityError::Expired { exp: 60 }, Some("acme")).to_string();
        assert!(
            expired.contains("why: the token expired at 1970-01-01T00:01:00.000Z"),
            "{expired}"
        );
        assert!(expired.contains("toolgate operators issue"), "{expired}");
        let foreign = refused(&IdentityError::ForeignKey("no key".into()), Some("acme"));
        assert_eq!(foreign.exit_code(), 1);
        let foreign = foreign.to_string();
        assert!(
            foreign.contains("toolgate operators list --tenant acme"),
            "{foreign}"
        );
        let unsigned = refused(&IdentityError::Unsigned("none".into()), None).to_string();
        assert!(unsigned.contains("not signed with EdDSA"), "{unsigned}");
        assert!(
            unsigned.contains("next: pass the whole token"),
            "{unsigned}"
        );
    }
}
