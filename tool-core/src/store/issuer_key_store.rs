//! [`IssuerKeyStore`]: the public keys of the issuers whose operator tokens are accepted.

use async_trait::async_trait;

use super::StoreError;
use crate::identity::IssuerKey;

/// The public keys of the issuers of operator tokens (`identity::IssuerSecret`), per tenant:
/// what an operator's token is checked against
/// ([`TokenVerifier::new`](crate::identity::TokenVerifier::new)). Only public keys: a store
/// never holds an issuer's secret.
///
/// A tenant's key is added by the application, or by `toolgate operators init`; whoever checks an
/// operator's token reads the keys of the tenant the token claims (the command line does, before
/// each command that decides or acts).
#[async_trait]
pub trait IssuerKeyStore: Send + Sync {
    /// Keeps `key`, added at `now_ms`: tokens it signs are accepted from now on. Answers
    /// `false`, changing nothing, when a key of the same id ([`IssuerKey::kid`]) is held
    /// already.
    async fn add_issuer_key(&self, key: &IssuerKey, now_ms: i64) -> Result<bool, StoreError>;

    /// The keys of `tenant`, in the order they were added.
    async fn issuer_keys(&self, tenant: &str) -> Result<Vec<IssuerKey>, StoreError>;
}
