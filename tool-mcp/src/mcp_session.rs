//! One MCP session's state: its run, and the tools it was shown.
//!
//! The server makes one for each MCP session: a connection on stdio or another byte stream, a
//! streamable HTTP session (the SDK asks the server for a handler when one starts), or, for a
//! request of protocol 2026-07-28 and later, which has no session, the request.

use std::sync::{Arc, Mutex, OnceLock};

use toolgate_core::{AuthContext, Session};

use crate::admitted::Admitted;
use crate::catalog::Catalog;

/// An MCP session's run and catalog.
pub(crate) struct McpSession {
    catalog: Arc<Catalog>,
    /// The run id of the session's run, made when a call first needs it.
    run_id: OnceLock<String>,
    /// The toolgate session of the run, for a caller the hook admits as
    /// [`Admitted::Caller`]: kept so that every call of the MCP session shares its counters and
    /// abort, and replaced (the run kept) when the caller's permissions change.
    run: Mutex<Option<Session>>,
    /// The tools `tools/list` has shown this session, by their place in the catalog.
    shown: Arc<Shown>,
}

/// The tools a session was shown, by place in the catalog.
struct Shown(Mutex<Vec<bool>>);

impl McpSession {
    pub(crate) fn new(catalog: Arc<Catalog>) -> Self {
        let shown = Shown(Mutex::new(vec![false; catalog.len()]));
        McpSession {
            catalog,
            run_id: OnceLock::new(),
            run: Mutex::new(None),
            shown: Arc::new(shown),
        }
    }

    /// The run id of this MCP session: `mcp-` and 32 random hex digits, unique across
    /// processes and machines.
    pub(crate) fn run_id(&self) -> &str {
        self.run_id
            .get_or_init(|| format!("mcp-{}", uuid::Uuid::new_v4().simple()))
    }

    /// The toolgate session a request of this MCP session runs in, as `admitted`: the run of the
    /// MCP session for a caller, the application's run for a session; either way the model is
    /// taken to have been shown the tools this session was listed, and those the caller may
    /// call now.
    pub(crate) fn session(&self, admitted: Admitted) -> Session {
        match admitted {
            Admitted::Caller(auth) => self.caller_session(auth),
            Admitted::InRun(session) => {
                let shows = self.shows(Arc::new(session.auth().clone()));
                session.with_shown_tools(shows)
            }
        }
    }

    fn caller_session(&self, auth: Arc<AuthContext>) -> Session {
        let mut run = self.run.lock().expect("a session's run is never poisoned");
        match run.as_ref() {
            Some(current) if std::ptr::eq(current.auth(), &*auth) || *current.auth() == *auth => {
                current.clone()
            }
            Some(current) if current.auth().tenant() == auth.tenant() => {
                let shows = self.shows(auth.clone());
                let next = current.with_auth(auth).with_shown_tools(shows);
                *run = Some(next.clone());
                next
            }
            _ => {
                let shows = self.shows(auth.clone());
                // The run is this MCP session's alone: counted in it, not in the store.
                let next = Session::new(auth, self.run_id())
                    .unshared()
                    .with_shown_tools(shows);
                *run = Some(next.clone());
                next
            }
        }
    }

    /// What a session of `auth` shows: the tools listed to this MCP session, and those `auth`
    /// may call.
    fn shows(&self, auth: Arc<AuthContext>) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let catalog = self.catalog.clone();
        let shown = self.shown.clone();
        move |tool: &str| match catalog.place(tool) {
            Some(place) => catalog.permits(place, &auth) || shown.was(place),
            None => false,
        }
    }

    /// Notes that `tools/list` showed this session the tools at `places`.
    pub(crate) fn show(&self, places: impl Iterator<Item = usize>) {
        let mut shown = self
            .shown
            .0
            .lock()
            .expect("a session's list is never poisoned");
        for place in places {
            shown[place] = true;
        }
    }
}

impl Shown {
    fn was(&self, place: usize) -> bool {
        self.0.lock().expect("a session's list is never poisoned")[place]
    }
}
