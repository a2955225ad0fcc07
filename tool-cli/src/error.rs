//! What went wrong, for the operator (what, why, what to do), and the exit code it ends with.

use std::fmt;

use toolgate_core::store::StoreError;

/// How a command ended, when it did not succeed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command was not given as it must be (exit 2).
    Usage(Explained),
    /// A decision was refused, or what was asked for does not exist (exit 1).
    Refused(Explained),
    /// The store could not be opened, reached or read (exit 3).
    Store(Explained),
}

/// An error in three parts.
#[derive(Debug)]
pub(crate) struct Explained {
    /// What failed.
    pub(crate) what: String,
    /// Why.
    pub(crate) why: String,
    /// What to do about it.
    pub(crate) next: String,
}

impl Failure {
    /// A usage error.
    pub(crate) fn usage(
        what: impl Into<String>,
        why: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Failure::Usage(Explained::new(what, why, next))
    }

    /// A refusal.
    pub(crate) fn refused(
        what: impl Into<String>,
        why: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Failure::Refused(Explained::new(what, why, next))
    }

    /// A store error while doing `doing` ("list the approvals"), keeping the store's words and
    /// those of its source.
    pub(crate) fn store(doing: &str, error: &StoreError) -> Self {
        let mut why = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !why.contains(&text) {
                why.push_str(": ");
                why.push_str(&text);
            }
            source = cause.source();
        }
        let next = if error.is_unreachable() {
            "check that the database is running and reachable from here, then run the command again"
        } else {
            "check the store given with --store (or TOOLGATE_STORE) and that this toolgate is of the application's version"
        };
        Failure::Store(Explained::new(format!("could not {doing}"), why, next))
    }

    /// The process's exit code: 1 refused or not found, 2 usage, 3 store.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::Refused(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Store(_) => 3,
        }
    }
}

impl Explained {
    fn new(what: impl Into<String>, why: impl Into<String>, next: impl Into<String>) -> Self {
        Explained {
            what: what.into(),
            why: why.into(),
            next: next.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Failure::Usage(e) | Failure::Refused(e) | Failure::Store(e)) = self;
        write!(f, "error: {}\n  why: {}\n  next: {}", e.what, e.why, e.next)
    }
}
