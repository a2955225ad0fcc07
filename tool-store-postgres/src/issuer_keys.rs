//! The issuers' public keys in the table `toolgate_issuer_keys`, one row a key, in the order
//! added.

use async_trait::async_trait;
use toolgate_core::identity::IssuerKey;
use toolgate_core::store::{IssuerKeyStore, StoreError};

use crate::PostgresStore;
use crate::error::store_error;
use crate::statement::{ExecuteOn, FetchOn};

#[async_trait]
impl IssuerKeyStore for PostgresStore {
    async fn add_issuer_key(&self, key: &IssuerKey, now_ms: i64) -> Result<bool, StoreError> {
        let added = sqlx::query(
            "INSERT INTO toolgate_issuer_keys (kid, tenant_id, issuer, jwk, added_ms) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kid) DO NOTHING",
        )
        .bind(key.kid())
        .bind(&key.tenant)
        .bind(&key.issuer)
        .bind(key.to_jwk())
        .bind(now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(|error| store_error("add an issuer key", error))?;
        Ok(added.rows_affected() == 1)
    }

    async fn issuer_keys(&self, tenant: &str) -> Result<Vec<IssuerKey>, StoreError> {
        let jwks: Vec<String> = sqlx::query_scalar(
            "SELECT jwk FROM toolgate_issuer_keys WHERE tenant_id = $1 ORDER BY seq",
        )
        .bind(tenant)
        .fetch_all_on(&self.conns)
        .await
        .map_err(|error| store_error("read the issuer keys", error))?;
        jwks.iter()
            .map(|jwk| {
                IssuerKey::from_jwk(jwk)
                    .map_err(|err| StoreError::Corrupt(format!("an issuer key of {tenant}: {err}")))
            })
            .collect()
    }
}
