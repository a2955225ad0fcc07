//! Where the permissions a user holds now come from, for the checks made again before an
//! approved operation runs.

use async_trait::async_trait;

use crate::error::ToolError;

/// Resolves the permissions a user holds now.
///
/// Before an approved operation runs, the dispatcher checks again that its requester holds the
/// tool's `permission`: a permission revoked while the operation waited rejects it. Give the
/// dispatcher a source with
/// [`DispatcherBuilder::permission_source`](crate::dispatch::DispatcherBuilder::permission_source); without
/// one, the permissions recorded when the call was made are used, and a revocation is not seen.
///
/// ```
/// use toolgate::{dispatch::PermissionSource, ToolError};
///
/// struct Directory;
///
/// #[async_trait::async_trait]
/// impl PermissionSource for Directory {
///     async fn permissions(&self, tenant: &str, user: &str) -> Result<Option<Vec<String>>, ToolError> {
///         // Ask the application's directory; `None` for a user it does not know.
///         Ok((tenant == "acme" && user == "agent-7").then(|| vec!["refund:create".to_owned()]))
///     }
/// }
/// ```
#[async_trait]
pub trait PermissionSource: Send + Sync + 'static {
    /// The permissions `user` of `tenant` holds now, or `None` when the user is not known (who
    /// then holds none). An error rejects the operation, with the error's words as the reason:
    /// an approved operation never runs unchecked.
    async fn permissions(&self, tenant: &str, user: &str)
    -> Result<Option<Vec<String>>, ToolError>;
}
