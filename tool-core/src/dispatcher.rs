//! The pipeline every call goes through: look up, validate, authorise, execute under a deadline,
//! and one result per call id.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tracing::Instrument;

use crate::auth::Session;
use serde_json::Value;

use crate::call::{CallReport, MalformedCall, ToolCall};
use crate::ctx::Ctx;
use crate::error::{ErrorClass, RunAborted, ToolError};
use crate::registry::{RegisteredTool, Registry};
use crate::result::CallResult;
use crate::schema::normalize_numbers;
use crate::state::State;
use crate::validate::invalid_arguments;

/// The deadline of one attempt when a tool declares no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the calls a model emits against a [`Registry`].
///
/// Release 0.1 runs DESIGN §3 steps 1–4 and 8–10: look-up, validation, authorisation from the
/// session, execution under the tool's deadline, and the result object. Idempotency keys, retries,
/// approvals and budgets come with the releases that the descriptor fields name.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Look up an order by its id.
/// #[tool(permission = "orders:read")]
/// async fn get_order(order_id: String) -> Result<String, ToolError> {
///     Ok(format!("{order_id}: paid"))
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let mut registry = Registry::new();
/// registry.register::<get_order>().unwrap();
/// let dispatcher = Dispatcher::builder(registry).build();
/// let session = Session::new(AuthContext::new("acme", "agent").with_permissions(["orders:read"]), "run-1");
///
/// let call = ToolCall::new("call_1", "get_order", serde_json::json!({"order_id": "ORD-1"}));
/// let report = dispatcher.dispatch(&session, call).await.unwrap();
/// assert_eq!(report.result.to_json_string(), r#"{"status":"succeeded","replayed":false,"data":"ORD-1: paid"}"#);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    state: Arc<State>,
    default_timeout: Duration,
}

/// Configures a [`Dispatcher`].
#[derive(Debug)]
pub struct DispatcherBuilder {
    registry: Registry,
    state: State,
    default_timeout: Duration,
}

impl DispatcherBuilder {
    /// Gives tools a value they reach with [`Ctx::state`].
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The deadline for tools that declare no `timeout` (default [`DEFAULT_TIMEOUT`]).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The dispatcher.
    pub fn build(self) -> Dispatcher {
        Dispatcher {
            inner: Arc::new(Inner {
                registry: self.registry,
                state: Arc::new(self.state),
                default_timeout: self.default_timeout,
            }),
        }
    }
}

impl Dispatcher {
    /// Starts configuring a dispatcher for `registry`.
    pub fn builder(registry: Registry) -> DispatcherBuilder {
        DispatcherBuilder {
            registry,
            state: State::default(),
            default_timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Runs every call of one model turn concurrently; one report per call, in the order given.
    ///
    /// If any call aborts the run, the turn answers `Err` and the session stays aborted.
    pub async fn dispatch_turn(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<CallReport>, RunAborted> {
        if calls.len() == 1 {
            // The common turn: one call, no need to join.
            let call = calls.into_iter().next().expect("one call");
            return Ok(vec![self.dispatch(session, call).await?]);
        }
        let reports = join_all(calls.into_iter().map(|call| self.dispatch(session, call))).await;
        reports.into_iter().collect()
    }

    /// Runs one call through the pipeline. `Err` means the run is aborted (a missing permission,
    /// revoked credentials, a policy violation); every other outcome is a report for the model.
    pub async fn dispatch(
        &self,
        session: &Session,
        call: ToolCall,
    ) -> Result<CallReport, RunAborted> {
        if let Some(aborted) = session.aborted() {
            return Err(aborted.clone());
        }
        let ToolCall {
            id,
            name,
            arguments,
        } = call;
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {name}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %name,
            gen_ai.tool.call.id = %id,
            gen_ai.tool.type = "function",
            toolgate.status = tracing::field::Empty,
        );
        // The call id moves into the tool's context and back out, uncopied.
        let (id, outcome) = async {
            match self.prepare(session, &name, arguments) {
                Ok((registered, args)) => {
                    let ctx = Ctx::new(
                        session.auth_arc().clone(),
                        session.run_id_arc().clone(),
                        id,
                        registered.descriptor(),
                        self.inner.state.clone(),
                    );
                    let outcome = self.execute(registered, &ctx, args).await;
                    (ctx.into_call_id(), outcome)
                }
                Err(err) => (id, Err(err)),
            }
        }
        .instrument(span.clone())
        .await;
        let result = match outcome {
            Ok(result) => result,
            Err(err) if err.class() == ErrorClass::Abort => {
                span.record("toolgate.status", "run_aborted");
                return Err(session.abort(RunAborted::from_error(&err)));
            }
            Err(err) => CallResult::from_error(&err),
        };
        if !span.is_disabled() {
            span.record("toolgate.status", tracing::field::debug(result.status));
        }
        Ok(CallReport {
            call_id: id,
            tool: name,
            result,
        })
    }

    /// Steps 1 to 4: look-up, the arguments validated against the schema, and the permission.
    fn prepare(
        &self,
        session: &Session,
        name: &str,
        arguments: Result<Value, MalformedCall>,
    ) -> Result<(&RegisteredTool, Value), ToolError> {
        if let (true, Err(malformed)) = (name.is_empty(), &arguments) {
            // A call the format could not read at all: say what was wrong with it.
            return Err(ToolError::invalid_arguments(malformed.what.clone())
                .why(malformed.why.clone())
                .next("call one tool by its name, with its arguments as one JSON object"));
        }
        let registered = self.lookup(name)?;
        let descriptor = registered.descriptor();
        let mut args = match arguments {
            Ok(args) => args,
            Err(malformed) => {
                return Err(ToolError::invalid_arguments(malformed.what)
                    .why(malformed.why)
                    .next(format!(
                        "call {} again with its arguments as one JSON object",
                        descriptor.name
                    )));
            }
        };
        normalize_numbers(&mut args);
        let violations = registered.validator().violations_if_invalid(&args);
        if !violations.is_empty() {
            return Err(invalid_arguments(descriptor.name, &violations));
        }
        if let Some(permission) = descriptor.permission
            && !session.auth().has_permission(permission)
        {
            return Err(ToolError::permission_denied(format!(
                "the session may not call {}",
                descriptor.name
            ))
            .why(format!(
                "user `{}` of tenant `{}` lacks the permission `{permission}`",
                session.auth().user(),
                session.auth().tenant()
            )));
        }
        Ok((registered, args))
    }

    /// Step 8: the tool runs under its deadline.
    async fn execute(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        args: Value,
    ) -> Result<CallResult, ToolError> {
        let descriptor = registered.descriptor();
        let deadline = descriptor.timeout.unwrap_or(self.inner.default_timeout);
        match tokio::time::timeout(deadline, registered.tool().invoke(ctx, args)).await {
            Ok(Ok(data)) => Ok(CallResult::succeeded(data)),
            Ok(Err(err)) => Err(err),
            Err(_elapsed) => Err(deadline_passed(
                descriptor.name,
                descriptor.side_effect.is_read(),
                deadline,
            )),
        }
    }

    fn lookup(&self, name: &str) -> Result<&RegisteredTool, ToolError> {
        self.inner.registry.get(name).ok_or_else(|| {
            let known = self.inner.registry.names().collect::<Vec<_>>().join(", ");
            ToolError::new(
                crate::error::ErrorKind::UnknownTool,
                format!("there is no tool named {}", crate::call::excerpt(name)),
            )
            .why(format!("the tools are: {known}"))
            .next(format!("call one of: {known}"))
        })
    }
}

/// The error for a call that ran past its deadline: a read timed out; a write may have been
/// applied, so its outcome is unknown, never a failure.
fn deadline_passed(tool: &str, is_read: bool, deadline: Duration) -> ToolError {
    if is_read {
        ToolError::timeout(format!("{tool} did not answer within {deadline:?}")).next(format!(
            "call {tool} again, or tell the user the system is slow"
        ))
    } else {
        ToolError::outcome_unknown(format!("{tool} did not finish within {deadline:?}"))
            .why("the request may have been applied before the deadline passed")
            .next("do not repeat the call or assume it failed; tell the user the outcome is being checked")
    }
}
