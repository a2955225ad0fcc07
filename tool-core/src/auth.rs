//! Who is calling: the session's authenticated context, never taken from arguments.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use crate::run::RunAborted;
use crate::run_limits::RunLimits;
use crate::store::RunRecord;

/// The authenticated caller of a session: tenant, user and the permissions they hold.
///
/// Built by the application from its own authentication; a tool's arguments never change it.
///
/// ```
/// use toolgate::AuthContext;
///
/// let auth = AuthContext::new("acme", "agent-7").with_permissions(["orders:read"]);
/// assert!(auth.has_permission("orders:read"));
/// assert!(!auth.has_permission("refund:create"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthContext {
    tenant: String,
    user: String,
    permissions: BTreeSet<String>,
}

impl AuthContext {
    /// A caller with no permissions.
    pub fn new(tenant: impl Into<String>, user: impl Into<String>) -> Self {
        AuthContext {
            tenant: tenant.into(),
            user: user.into(),
            permissions: BTreeSet::new(),
        }
    }

    /// Adds permissions.
    pub fn with_permissions<I, P>(mut self, permissions: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.permissions
            .extend(permissions.into_iter().map(Into::into));
        self
    }

    /// The tenant every key and record is scoped by.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The user (or agent) acting.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Whether the caller holds `permission`.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions.contains(permission)
    }

    /// Every permission held, in order.
    pub fn permissions(&self) -> impl Iterator<Item = &str> {
        self.permissions.iter().map(String::as_str)
    }
}

/// One agent run: who is calling, the run id that scopes idempotency keys and the run's
/// counters, and the run's limits when they differ from the dispatcher's.
///
/// Once a call aborts the run (a missing permission, say), every later dispatch in the session
/// returns the same [`RunAborted`] without running anything.
///
/// The run's counters (turns, calls, attempts of each tool, failed calls) live in the
/// dispatcher's operation store when it has one (unless the session is
/// [unshared](Session::unshared)), so a restarted process (a new `Session` with
/// the same tenant and run id) keeps them, and so does its abort. A dispatcher without a store
/// keeps them in memory, in this `Session` and its clones: a new `Session` value starts a new
/// count.
#[derive(Clone)]
pub struct Session {
    auth: Arc<AuthContext>,
    run_id: Arc<str>,
    aborted: Arc<OnceLock<RunAborted>>,
    limits: Option<RunLimits>,
    /// The run's counters when the dispatcher has no store; with one, the mirror of the counts
    /// it answered, which stands in while it does not answer. Shared by every clone.
    local: Arc<Mutex<RunRecord>>,
    /// The tools the run's model was shown, when that is not every tool.
    shown: Option<Arc<dyn ShownTools>>,
    /// The run is this session's alone (see [`Session::unshared`]).
    unshared: bool,
}

/// The tools a run's model was shown, when it was not shown every tool of the registry (see
/// [`Session::with_shown_tools`]). A closure `Fn(&str) -> bool` is one.
pub trait ShownTools: Send + Sync + 'static {
    /// Whether the model was shown the tool named `tool`.
    fn shows(&self, tool: &str) -> bool;
}

impl<F> ShownTools for F
where
    F: Fn(&str) -> bool + Send + Sync + 'static,
{
    fn shows(&self, tool: &str) -> bool {
        self(tool)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("auth", &self.auth)
            .field("run_id", &self.run_id)
            .field("aborted", &self.aborted.get())
            .field("limits", &self.limits)
            .field("shows_every_tool", &self.shown.is_none())
            .field("unshared", &self.unshared)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A run `run_id` of the caller `auth`.
    pub fn new(auth: impl Into<Arc<AuthContext>>, run_id: impl Into<String>) -> Self {
        Session {
            auth: auth.into(),
            run_id: Arc::from(run_id.into()),
            aborted: Arc::new(OnceLock::new()),
            limits: None,
            local: Arc::default(),
            shown: None,
            unshared: false,
        }
    }

    /// The same run (its id, limits, counters and abort, shared with this session and its
    /// clones) for the caller `auth`: the run's caller as authenticated again, with the
    /// permissions it holds now. A caller of another tenant is another run: give it a
    /// [`Session::new`] of its own.
    ///
    /// ```
    /// use toolgate::{AuthContext, Session};
    ///
    /// let before = Session::new(AuthContext::new("acme", "agent").with_permissions(["refund:create"]), "run-1");
    /// let after = before.with_auth(AuthContext::new("acme", "agent"));
    /// assert_eq!(after.run_id(), "run-1");
    /// assert!(!after.auth().has_permission("refund:create"));
    /// ```
    pub fn with_auth(&self, auth: impl Into<Arc<AuthContext>>) -> Session {
        Session {
            auth: auth.into(),
            ..self.clone()
        }
    }

    /// This run's model was shown only the tools `shown` shows (a catalog made for this
    /// session, such as the tools it may call): a call of any other tool is answered as a tool
    /// that does not exist would be (`unknown_tool`, naming only the tools shown), nothing runs
    /// and the run goes on. Without it, the model is taken to have been shown every tool of
    /// the registry, and a call of a tool whose permission the session lacks aborts the run.
    ///
    /// ```
    /// use toolgate::{AuthContext, Session};
    ///
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1")
    ///     .with_shown_tools(|tool: &str| tool == "get_order");
    /// assert!(session.shows("get_order"));
    /// assert!(!session.shows("issue_refund"));
    /// ```
    pub fn with_shown_tools(mut self, shown: impl ShownTools) -> Self {
        self.shown = Some(Arc::new(shown));
        self
    }

    /// Whether this run's model was shown the tool named `tool`: always, unless the session
    /// was made [`with_shown_tools`](Self::with_shown_tools).
    pub fn shows(&self, tool: &str) -> bool {
        self.shown.as_ref().is_none_or(|shown| shown.shows(tool))
    }

    /// This run's limits, in place of the dispatcher's
    /// ([`DispatcherBuilder::run_limits`](crate::dispatch::DispatcherBuilder::run_limits)).
    ///
    /// ```
    /// use toolgate::{AuthContext, RunLimits, Session};
    ///
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1")
    ///     .with_limits(RunLimits::DEFAULT.max_steps(8));
    /// assert_eq!(session.limits().unwrap().max_steps, Some(8));
    /// ```
    pub fn with_limits(mut self, limits: RunLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The run is this session's alone: this value and its clones are the only ones that drive
    /// it, and it ends with them (no other process, and no later `Session` value, goes on with
    /// its run id). Its counters (turns, tool calls, attempts of each tool, failed calls for
    /// repeat detection) then live in this session only, even when the dispatcher has an
    /// operation store: a turn asks the store nothing for them. A read call then costs no store
    /// round trip on its path (its audit record is written after the turn), and a write two:
    /// its claim, and its outcome with its audit record.
    ///
    /// What the store still holds for such a run: its operations, approvals, audit trail and
    /// abort (stored, so that an approval of the run is rejected in every process). What it does
    /// not: the run's counts, which `toolgate approvals show` therefore cannot report, and which a
    /// crash loses, with the session that was their only user. Two unshared sessions given the
    /// same run id are two runs to the limits: each counts apart, and neither is stopped by an
    /// abort the other stored.
    ///
    /// The MCP server's runs are unshared: one per MCP session, under an id the server makes.
    /// Keep the default, a run counted in the store, for a run that a restarted process or
    /// several processes go on with.
    ///
    /// ```
    /// use toolgate::{AuthContext, Session};
    ///
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1").unshared();
    /// assert!(session.is_unshared());
    /// assert!(session.with_auth(AuthContext::new("acme", "desk")).is_unshared());
    /// assert!(!Session::new(AuthContext::new("acme", "agent"), "run-2").is_unshared());
    /// ```
    pub fn unshared(mut self) -> Self {
        self.unshared = true;
        self
    }

    /// Whether the run is this session's alone ([`unshared`](Self::unshared)).
    pub fn is_unshared(&self) -> bool {
        self.unshared
    }

    /// This run's own limits, if it has some.
    pub fn limits(&self) -> Option<RunLimits> {
        self.limits
    }

    pub(crate) fn local_run(&self) -> &Mutex<RunRecord> {
        &self.local
    }

    /// The authenticated caller.
    pub fn auth(&self) -> &AuthContext {
        &self.auth
    }

    pub(crate) fn auth_arc(&self) -> &Arc<AuthContext> {
        &self.auth
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub(crate) fn run_id_arc(&self) -> &Arc<str> {
        &self.run_id
    }

    /// Why the run was aborted, if it was.
    pub fn aborted(&self) -> Option<&RunAborted> {
        self.aborted.get()
    }

    /// Records the abort; the first one wins and is returned.
    pub(crate) fn abort(&self, abort: RunAborted) -> RunAborted {
        self.aborted.get_or_init(|| abort).clone()
    }
}
