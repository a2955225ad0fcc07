//! The side-effect class of a tool.

use serde::Serialize;

/// What a tool does to the world. It decides how calls are stored, retried and described.
///
/// Reads are retried freely and never stored; writes and destructive calls always run under an
/// idempotency key, so a repeated call returns the original outcome instead of acting twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    /// Only reads: safe to call any number of times.
    #[default]
    Read,
    /// Changes state in a system of record (a refund, an email, a new row).
    Write,
    /// Changes state in a way that cannot be undone (a deletion, a closed account).
    Destructive,
}

impl SideEffect {
    /// The name used in the attribute and on the wire: `read`, `write` or `destructive`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SideEffect::Read => "read",
            SideEffect::Write => "write",
            SideEffect::Destructive => "destructive",
        }
    }

    /// True for [`SideEffect::Read`].
    pub const fn is_read(self) -> bool {
        matches!(self, SideEffect::Read)
    }

    /// The sentence appended to a tool's description so the model knows the class by itself.
    pub(crate) const fn sentence(self) -> &'static str {
        match self {
            SideEffect::Read => "Read-only: this tool changes nothing and is safe to call again.",
            SideEffect::Write => {
                "Side effect: this tool changes state. Repeating a call with the same arguments \
                 returns the original result instead of acting twice."
            }
            SideEffect::Destructive => {
                "Side effect: this tool changes state irreversibly. Repeating a call with the same \
                 arguments returns the original result instead of acting twice."
            }
        }
    }
}

impl std::fmt::Display for SideEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
