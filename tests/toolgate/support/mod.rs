//! What the test modules share: the session most of them act in, the real stores they run
//! against (`stores`), and the property tests' arguments (`json_args`). Each module keeps the
//! tools and fake providers of its own area: their attributes are what it tests.

use toolgate::{AuthContext, Session};

pub(crate) mod json_args;
pub(crate) mod stores;

/// The agent of tenant `acme`, without permissions.
pub(crate) fn agent() -> AuthContext {
    AuthContext::new("acme", "agent")
}

/// A session of [`agent`] in run `run-1`.
pub(crate) fn session() -> Session {
    Session::new(agent(), "run-1")
}

/// A session of [`agent`] in `run`.
pub(crate) fn session_in(run: impl Into<String>) -> Session {
    Session::new(agent(), run)
}
