//! The issuers' public keys in the table `issuer_keys`, one row a key, in the order added.

use async_trait::async_trait;
use toolgate_core::identity::IssuerKey;
use toolgate_core::store::{IssuerKeyStore, StoreError};

use crate::SqliteStore;
use crate::error::backend;

#[async_trait]
impl IssuerKeyStore for SqliteStore {
    async fn add_issuer_key(&self, key: &IssuerKey, now_ms: i64) -> Result<bool, StoreError> {
        let added = sqlx::query(
            "INSERT INTO issuer_keys (kid, tenant_id, issuer, jwk, added_ms, seq) \
             VALUES (?1, ?2, ?3, ?4, ?5, \
                     (SELECT COALESCE(MAX(seq), 0) + 1 FROM issuer_keys)) \
             ON CONFLICT (kid) DO NOTHING",
        )
        .bind(key.kid())
        .bind(&key.tenant)
        .bind(&key.issuer)
        .bind(key.to_jwk())
        .bind(now_ms)
        .execute(&self.writer)
        .await
        .map_err(backend("add an issuer key"))?;
        Ok(added.rows_affected() == 1)
    }

    async fn issuer_keys(&self, tenant: &str) -> Result<Vec<IssuerKey>, StoreError> {
        let jwks: Vec<String> =
            sqlx::query_scalar("SELECT jwk FROM issuer_keys WHERE tenant_id = ?1 ORDER BY seq")
                .bind(tenant)
                .fetch_all(&self.reader)
                .await
                .map_err(backend("read the issuer keys"))?;
        jwks.iter()
            .map(|jwk| {
                IssuerKey::from_jwk(jwk)
                    .map_err(|err| StoreError::Corrupt(format!("an issuer key of {tenant}: {err}")))
            })
            .collect()
    }
}
