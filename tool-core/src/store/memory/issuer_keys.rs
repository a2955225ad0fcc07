//! The issuer keys of a [`MemoryStore`](super::MemoryStore), in its tables.

use async_trait::async_trait;

use super::MemoryStore;
use crate::identity::IssuerKey;
use crate::store::{IssuerKeyStore, StoreError};

#[async_trait]
impl IssuerKeyStore for MemoryStore {
    async fn add_issuer_key(&self, key: &IssuerKey, _now_ms: i64) -> Result<bool, StoreError> {
        let kid = key.kid();
        Ok(self.tables(|tables| {
            if tables.issuer_keys.iter().any(|held| held.kid() == kid) {
                return false;
            }
            tables.issuer_keys.push(key.clone());
            true
        }))
    }

    async fn issuer_keys(&self, tenant: &str) -> Result<Vec<IssuerKey>, StoreError> {
        Ok(self.tables(|tables| {
            tables
                .issuer_keys
                .iter()
                .filter(|key| key.tenant == tenant)
                .cloned()
                .collect()
        }))
    }
}
