//! The idempotency key a write or destructive tool hands to its provider.

use std::fmt;
use std::ops::Deref;

/// The idempotency key of one write or destructive operation: declare a `key: &IdempotencyKey`
/// parameter on such a tool (or on its reconcile hook) and hand it to the provider, as an
/// `Idempotency-Key` header say. It is derived from the operation, not the call, so it is the same
/// on every retry, after a restart and for the reconcile hook. It dereferences to `str`.
///
/// ```
/// use toolgate::prelude::*;
/// use toolgate::IdempotencyKey;
///
/// /// Refund an order.
/// #[tool(side_effect = "write", key = [order_id])]
/// async fn refund(key: &IdempotencyKey, order_id: String) -> Result<String, ToolError> {
///     let header: &str = key;
///     Ok(format!("refunded {order_id} under {header}"))
/// }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub(crate) fn new(key: String) -> Self {
        IdempotencyKey(key)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for IdempotencyKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
