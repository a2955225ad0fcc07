//! The context a tool receives: who calls, in which run, for which call, and the application state.

use std::sync::Arc;

use crate::auth::AuthContext;
use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::key::IdempotencyKey;
use crate::state::StateMap;

/// Everything a tool may know about the call it serves. Declare a `ctx: &Ctx` parameter to get
/// it; it never appears in the schema.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Say who calls, in which run.
/// #[tool]
/// async fn whoami(ctx: &Ctx) -> Result<String, ToolError> {
///     Ok(format!("{} in run {}", ctx.auth().tenant(), ctx.run_id()))
/// }
/// ```
#[derive(Debug)]
pub struct Ctx {
    auth: Arc<AuthContext>,
    run_id: Arc<str>,
    call_id: String,
    tool: &'static ToolDescriptor,
    state: Arc<StateMap>,
    idempotency_key: Option<IdempotencyKey>,
}

impl Ctx {
    pub(crate) fn new(
        auth: Arc<AuthContext>,
        run_id: Arc<str>,
        call_id: String,
        tool: &'static ToolDescriptor,
        state: Arc<StateMap>,
    ) -> Self {
        Ctx {
            auth,
            run_id,
            call_id,
            tool,
            state,
            idempotency_key: None,
        }
    }

    pub(crate) fn with_idempotency_key(mut self, key: String) -> Self {
        self.idempotency_key = Some(IdempotencyKey::new(key));
        self
    }

    /// The operation's idempotency key, for a write or destructive tool: hand it to the
    /// provider (an `Idempotency-Key` header, say). It is derived from the operation, not the
    /// call, so it is the same on every retry, after a restart and for the reconcile hook.
    /// `None` for reads, which are never stored. A write or destructive tool can take it as a
    /// `key: &IdempotencyKey` parameter instead, which is never `None`.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    pub(crate) fn operation_key(&self) -> Option<&IdempotencyKey> {
        self.idempotency_key.as_ref()
    }

    pub(crate) fn state_map(&self) -> &StateMap {
        &self.state
    }

    /// The authenticated caller.
    pub fn auth(&self) -> &AuthContext {
        &self.auth
    }

    /// The agent run this call belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The provider's id of this call (it matches the result to the call, nothing more).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The descriptor of the tool being called.
    pub fn tool(&self) -> &'static ToolDescriptor {
        self.tool
    }

    /// The application value of type `T` given to the dispatcher, or an internal error that
    /// names the missing type. Checked only when called; a `State<T>` parameter is checked when
    /// the dispatcher is built.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, ToolError> {
        self.state.get::<T>()
    }
}
