//! The context a tool receives: who calls, in which run, for which call, and the application state.

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::AuthContext;
use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::key::IdempotencyKey;
use crate::outbox::{OutboxSlot, Transaction, payload_of};
use crate::state::StateMap;
use crate::steps::StepJournal;

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
    outbox: Option<Arc<OutboxSlot>>,
    journal: Option<Arc<StepJournal>>,
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
            outbox: None,
            journal: None,
        }
    }

    /// An outbox tool's body runs with the store's open transaction.
    pub(crate) fn with_outbox(mut self, slot: Arc<OutboxSlot>) -> Self {
        self.outbox = Some(slot);
        self
    }

    /// A write's steps are journaled under the claim it runs under.
    pub(crate) fn with_journal(mut self, journal: Arc<StepJournal>) -> Self {
        self.journal = Some(journal);
        self
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

    /// The call id, given back once the call is done with its context.
    pub(crate) fn into_call_id(self) -> String {
        self.call_id
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

    /// The store's open transaction, for a tool declared `delivery = "outbox"`: write the
    /// application's own rows with the store's connection inside it
    /// (`toolgate_store_sqlite::connection(&mut tx)`, `toolgate_store_postgres::connection(&mut
    /// tx)`), and they commit with the operation record and the event, or roll back with them.
    /// An error for any other tool. Drop it before the body returns.
    ///
    /// ```no_run
    /// use toolgate::prelude::*;
    ///
    /// /// Record a refund request; a worker sends it to the payment provider.
    /// #[tool(side_effect = "write", delivery = "outbox", key = [order_id])]
    /// async fn request_refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<String, ToolError> {
    ///     let tx = ctx.transaction().await?;
    ///     // e.g. sqlx::query("INSERT INTO refund_requests …")
    ///     //     .execute(toolgate_store_sqlite::connection(&mut tx)?)
    ///     drop(tx);
    ///     ctx.enqueue(&serde_json::json!({"order_id": order_id, "amount": amount}))?;
    ///     Ok(format!("refund of {amount} for {order_id} queued"))
    /// }
    /// ```
    pub async fn transaction(&self) -> Result<Transaction<'_>, ToolError> {
        match &self.outbox {
            Some(slot) => slot.transaction().await,
            None => Err(self.not_outbox("transaction")),
        }
    }

    /// Enqueues the event an outbox tool's operation delivers: `payload` is what the worker's
    /// handler for this tool receives, with the operation's key. One event per operation; it
    /// commits with the operation record and the tool's rows. An error for a tool not declared
    /// `delivery = "outbox"`.
    pub fn enqueue<T: Serialize + ?Sized>(&self, payload: &T) -> Result<(), ToolError> {
        let Some(slot) = &self.outbox else {
            return Err(self.not_outbox("enqueue"));
        };
        slot.enqueue(self.tool.name, payload_of(self.tool.name, payload)?)
    }

    fn not_outbox(&self, what: &str) -> ToolError {
        ToolError::internal(format!(
            "{} called ctx.{what}(), which only a tool declared delivery = \"outbox\" has",
            self.tool.name
        ))
        .with_next("do not repeat this call; tell the user the tool is misconfigured")
    }

    /// Runs `step`, the step `name` of this write, journaled under its operation: a retry, a
    /// takeover after a crash, or the same call again after a `partial` outcome skips a step that
    /// succeeded and answers its recorded output; a step that failed runs again; a step that
    /// began and whose outcome was never recorded is never run again: this answers
    /// `outcome_unknown` for the reconciler (see [`Ctx::step_or_check`] to check it instead).
    ///
    /// Put every side effect of a multi-step tool in a step: code between steps runs again on a
    /// retry. A step's error of kind `outcome_unknown` leaves it unknown; any other error records
    /// it failed. When a step fails after another succeeded, or the tool answers a definite error
    /// after a step succeeded (reported as a failed `rest of <tool>`), the call answers
    /// `partial`, naming each step; a succeeded step is never rolled back or rerun.
    ///
    /// A read's steps are not journaled (reads are never stored): `step` just runs. So are those
    /// of a write on a dispatcher without a store. An outbox tool has no steps: its body is one
    /// transaction.
    ///
    /// ```
    /// use toolgate::prelude::*;
    ///
    /// /// Update the customer's record, then notify them.
    /// #[tool(side_effect = "write")]
    /// async fn update_and_notify(ctx: &Ctx, customer: String) -> Result<String, ToolError> {
    ///     let crm = ctx.step("update_crm", async { Ok(format!("crm:{customer}")) }).await?;
    ///     ctx.step("notify", async { Ok(()) }).await?;
    ///     Ok(crm)
    /// }
    /// ```
    pub async fn step<T, F>(&self, name: &str, step: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = Result<T, ToolError>>,
    {
        self.run_step(
            name,
            step,
            None::<fn() -> std::future::Ready<Result<Option<T>, ToolError>>>,
        )
        .await
    }

    /// [`Ctx::step`], with `check` for a step that began in an earlier attempt and whose outcome
    /// was never recorded: it asks the system the step acts on whether it was applied.
    /// `Ok(Some(output))`: applied, recorded as succeeded; `Ok(None)`: not applied, so `step`
    /// runs; an error: still unknown, and the call answers `outcome_unknown`.
    pub async fn step_or_check<T, F, C, CF>(
        &self,
        name: &str,
        step: F,
        check: C,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = Result<T, ToolError>>,
        C: FnOnce() -> CF,
        CF: Future<Output = Result<Option<T>, ToolError>>,
    {
        self.run_step(name, step, Some(check)).await
    }

    async fn run_step<T, F, C, CF>(
        &self,
        name: &str,
        step: F,
        check: Option<C>,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = Result<T, ToolError>>,
        C: FnOnce() -> CF,
        CF: Future<Output = Result<Option<T>, ToolError>>,
    {
        if self.outbox.is_some() {
            return Err(ToolError::internal(format!(
                "{} called ctx.step(\"{name}\"); an outbox tool's body is one transaction and \
                 has no steps",
                self.tool.name
            )));
        }
        match &self.journal {
            Some(journal) => journal.run(self.tool.name, name, step, check).await,
            None => step.await,
        }
    }
}
