//! Who decides, resumes an outbox event or settles an operation: the operator an operator token
//! proves (`--token`, or `TOOLGATE_TOKEN`), signed in against the store's issuer keys
//! ([`sign_in`](crate::sign_in::sign_in)), and what that operator may do. Never a name typed on
//! the command line, nor one taken from the approval, the event or the operation.

use std::fmt;

use clap::Args;
use toolgate_core::identity::Operator;

use crate::error::Failure;

/// The environment variable holding the operator token when `--token` is not given.
const TOKEN_ENV: &str = "TOOLGATE_TOKEN";

/// The operator token as the command line gives it: `--token`, or `TOOLGATE_TOKEN`.
#[derive(Default, Clone, PartialEq, Eq, Args)]
pub(crate) struct TokenArg {
    /// Your operator token, as `toolgate operators issue` printed it
    // Never shown: not in the help (`hide_env_values`), nor in `Debug`.
    #[arg(
        long = "token",
        value_name = "TOKEN",
        env = TOKEN_ENV,
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,
}

impl fmt::Debug for TokenArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.token.as_ref().map(|_| "<token>");
        f.debug_struct("TokenArg").field("token", &shown).finish()
    }
}

/// Who acts with the token: an approver deciding, an operator resuming an outbox event, or an
/// operator settling an unknown outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `approvals approve` and `approvals reject`.
    Approver,
    /// `outbox resume`.
    Operator,
    /// `ops settle`.
    Settler,
}

impl Role {
    fn noun(self) -> &'static str {
        match self {
            Role::Approver => "approver",
            Role::Operator | Role::Settler => "operator",
        }
    }

    /// The permission a token for this role must hold, as the missing token's advice names it.
    fn permission(self) -> &'static str {
        match self {
            Role::Approver => "the approval's permission (`toolgate approvals show ID` names it)",
            Role::Operator => "outbox:resume",
            Role::Settler => "ops:settle",
        }
    }

    /// Why the command needs a token.
    fn why(self) -> &'static str {
        match self {
            Role::Approver => {
                "approving or rejecting records who decided, proven by a token the tenant's issuer signed, and the approval's own requester is never taken for the approver"
            }
            Role::Operator => {
                "a resume is allowed to an operator of the event's tenant who holds outbox:resume, proven by a token the tenant's issuer signed; the event names no one"
            }
            Role::Settler => {
                "a settlement is allowed to an operator of the operation's tenant who holds ops:settle, proven by a token the tenant's issuer signed; the operation names no one"
            }
        }
    }
}

/// The token `arg` gives for `role`; none (or an empty one) is a usage error that says how to
/// get one. It is not checked here: [`crate::sign_in::sign_in`] checks it against the store.
pub(crate) fn token(role: Role, arg: &TokenArg) -> Result<&str, Failure> {
    match arg.token.as_deref().map(str::trim) {
        Some(token) if !token.is_empty() => Ok(token),
        _ => Err(Failure::usage(
            format!("no {} token", role.noun()),
            role.why(),
            format!(
                "give --token TOKEN, or set {TOKEN_ENV}, with a token issued to you holding {}: whoever holds the tenant's issuer key runs `toolgate operators issue --secret-file PATH --subject YOU --permission PERMISSION`",
                role.permission()
            ),
        )),
    }
}

/// Refuses `operator` the action `verb` on `object` (`resume`, `the outbox event k1`) unless
/// they hold `permission`.
pub(crate) fn operator_may(
    operator: &Operator,
    permission: &str,
    verb: &str,
    object: &str,
) -> Result<(), Failure> {
    let (user, tenant) = (operator.subject(), operator.tenant());
    if !operator.has_permission(permission) {
        return Err(Failure::refused(
            format!("could not {verb} {object}"),
            format!("{user} of tenant {tenant} does not hold the permission `{permission}`"),
            format!("{verb} with the token of an operator who holds `{permission}`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(token: Option<&str>) -> TokenArg {
        TokenArg {
            token: token.map(str::to_owned),
        }
    }

    #[test]
    fn a_token_is_given_or_the_usage_error_says_how_to_get_one() {
        assert_eq!(
            token(Role::Approver, &given(Some("a.b.c"))).unwrap(),
            "a.b.c"
        );
        assert_eq!(
            token(Role::Approver, &given(Some(" a.b.c\n"))).unwrap(),
            "a.b.c",
            "as `$(…)` or a file gives it"
        );
        for (role, noun, permission) in [
            (Role::Approver, "approver", "toolgate approvals show ID"),
            (Role::Operator, "operator", "outbox:resume"),
            (Role::Settler, "operator", "ops:settle"),
        ] {
            for missing in [None, Some(""), Some("  ")] {
                let err = token(role, &given(missing)).expect_err("no token");
                assert_eq!(err.exit_code(), 2);
                let text = err.to_string();
                for says in [
                    &format!("no {noun} token"),
                    "--token TOKEN",
                    TOKEN_ENV,
                    "toolgate operators issue",
                    permission,
                ] {
                    assert!(text.contains(says), "{says:?} in {text}");
                }
            }
        }
    }

    #[test]
    fn the_token_is_never_shown_by_debug() {
        let shown = format!("{:?}", given(Some("eyJ.secret.sig")));
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("<token>"), "{shown}");
    }
}
