//! Signing an operator in: a token an issuer signed, checked against the issuer keys the store
//! holds for the tenant the token claims. The command line and the console both sign in here.

use toolgate_core::identity::{Operator, TokenVerifier};
use toolgate_core::store::OperationStore;

use crate::error::Failure;

/// The operator `token` proves at `now_ms`, or why it is refused: a token that does not read,
/// is unsigned, was signed by a key the store does not hold for its tenant (another key, another
/// tenant's, or changed since), or expired.
pub(crate) async fn sign_in(
    store: &dyn OperationStore,
    token: &str,
    now_ms: i64,
) -> Result<Operator, Failure> {
    let refused = |err: toolgate_core::identity::IdentityError| {
        Failure::refused("the operator token is refused", err.to_string(), err.next())
    };
    let tenant = TokenVerifier::claimed_tenant(token).map_err(refused)?;
    let keys = store
        .issuer_keys(&tenant)
        .await
        .map_err(|e| Failure::store(&format!("read the issuer keys of tenant {tenant}"), &e))?;
    Operator::authenticate(&TokenVerifier::new(keys), token, now_ms).map_err(refused)
}
