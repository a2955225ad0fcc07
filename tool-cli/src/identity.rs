//! Who decides (or resumes an outbox event): the approver's or operator's tenant, user and
//! permissions, from the command line (for local use) or from the JSON file `--identity` or
//! `TOOLGATE_IDENTITY` names (for real use), never from the approval or the event.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;
use toolgate_core::AuthContext;
use toolgate_core::identity::{Authenticator, Claims, IdentityError, Operator};

use crate::error::Failure;
use crate::time::now_ms;

/// The environment variable naming the identity file when `--identity` is not given.
const IDENTITY_ENV: &str = "TOOLGATE_IDENTITY";

/// The identity as the command line gives it: `--as`, `--tenant`, `--permission` (repeatable),
/// or the file `--identity` (or `TOOLGATE_IDENTITY`) names. [`resolve_as`] takes exactly one.
#[derive(Debug, Default, Clone, PartialEq, Eq, Args)]
pub(crate) struct IdentityFlags {
    /// Your user (local use; or --identity)
    #[arg(long = "as", value_name = "USER")]
    pub(crate) user: Option<String>,
    /// Your tenant (local use; or --identity)
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: Option<String>,
    /// A permission you hold, repeatable (local use; or --identity)
    #[arg(long = "permission", value_name = "PERMISSION")]
    pub(crate) permissions: Vec<String>,
    /// Your identity, a JSON file {"tenant", "user", "permissions"}, instead of --as, --tenant
    /// and --permission (real use)
    #[arg(
        long = "identity",
        value_name = "FILE",
        env = IDENTITY_ENV,
        hide_env_values = true
    )]
    pub(crate) file: Option<PathBuf>,
}

impl IdentityFlags {
    /// Whether `--as`, `--tenant` or `--permission` was given.
    fn any(&self) -> bool {
        self.user.is_some() || self.tenant.is_some() || !self.permissions.is_empty()
    }
}

/// Who acts with the identity: an approver deciding, an operator resuming an outbox event, or
/// an operator settling an unknown outcome.
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

    fn verb(self) -> &'static str {
        match self {
            Role::Approver => "decide",
            Role::Operator => "resume",
            Role::Settler => "settle",
        }
    }

    /// Why the command needs an identity.
    fn why(self) -> &'static str {
        match self {
            Role::Approver => {
                "approving or rejecting records who decided, and the approval's own requester is never taken for the approver"
            }
            Role::Operator => {
                "a resume is allowed to an operator of the event's tenant who holds outbox:resume, and the event names no one"
            }
            Role::Settler => {
                "a settlement is allowed to an operator of the operation's tenant who holds ops:settle, and the operation names no one"
            }
        }
    }
}

/// The approver: from the flags of `flags`, or from the file it names, exactly one of them.
pub(crate) fn resolve(flags: &IdentityFlags) -> Result<Operator, Failure> {
    resolve_as(Role::Approver, flags)
}

/// [`resolve`] for `role`, whose errors name it. An empty file name is no file.
pub(crate) fn resolve_as(role: Role, flags: &IdentityFlags) -> Result<Operator, Failure> {
    let typed = typed(role, flags)?;
    let noun = role.noun();
    Operator::authenticate(&Typed(&typed), "", now_ms()).map_err(|err| {
        Failure::refused(
            format!("the {noun}'s identity is refused"),
            err.to_string(),
            format!(
                "give the {noun}'s name and tenant exactly as they are, with no space, control or invisible character"
            ),
        )
    })
}

/// The issuer recorded with what a typed identity decides or does: nobody vouches for it but
/// whoever runs the command line.
pub(crate) const TYPED_ISSUER: &str = "typed";

/// An identity typed on the command line, "proven" by nothing but its typing: its claims are
/// what was typed, its issuer [`TYPED_ISSUER`].
struct Typed<'a>(&'a AuthContext);

impl Authenticator for Typed<'_> {
    fn authenticate(&self, _credential: &str, now_ms: i64) -> Result<Claims, IdentityError> {
        let now = now_ms.div_euclid(1000);
        Ok(Claims {
            iss: TYPED_ISSUER.to_owned(),
            sub: self.0.user().to_owned(),
            tenant: self.0.tenant().to_owned(),
            permissions: self.0.permissions().map(str::to_owned).collect(),
            iat: now,
            // For this command only.
            exp: now.saturating_add(60),
        })
    }
}

/// The identity `flags` give, as typed.
fn typed(role: Role, flags: &IdentityFlags) -> Result<AuthContext, Failure> {
    let (noun, verb) = (role.noun(), role.verb());
    let file = flags
        .file
        .as_deref()
        .filter(|file| !file.as_os_str().is_empty());
    match (file, flags.any()) {
        (Some(file), true) => Err(Failure::usage(
            format!("the {noun}'s identity is given twice"),
            format!(
                "--identity or {IDENTITY_ENV} names the identity file {} and --as, --tenant or --permission was given too; one source is used, never a mix",
                file.display()
            ),
            format!(
                "drop the flags to {verb} as the file's identity, or drop --identity and unset {IDENTITY_ENV} to {verb} as the flags say"
            ),
        )),
        (Some(file), false) => from_file(file),
        (None, true) => from_flags(role, flags),
        (None, false) => Err(Failure::usage(
            format!("no {noun} identity"),
            role.why(),
            format!(
                "give --as USER --tenant TENANT --permission PERMISSION (repeatable) for local use, or --identity FILE (or set {IDENTITY_ENV}) naming a JSON file {{\"tenant\": …, \"user\": …, \"permissions\": [...]}}"
            ),
        )),
    }
}

fn from_flags(role: Role, flags: &IdentityFlags) -> Result<AuthContext, Failure> {
    let noun = role.noun();
    let missing = |flag: &str| {
        Failure::usage(
            format!("the {noun}'s identity lacks {flag}"),
            format!("an {noun} is a user of one tenant: --as and --tenant are both needed"),
            format!(
                "give --as USER --tenant TENANT, and --permission PERMISSION for each permission the {noun} holds"
            ),
        )
    };
    let user = non_empty(flags.user.as_deref()).ok_or_else(|| missing("--as USER"))?;
    let tenant = non_empty(flags.tenant.as_deref()).ok_or_else(|| missing("--tenant TENANT"))?;
    Ok(AuthContext::new(tenant, user).with_permissions(flags.permissions.iter().cloned()))
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.trim().is_empty())
}

fn from_file(path: &Path) -> Result<AuthContext, Failure> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(
            format!("could not read the identity file {shown}"),
            e.to_string(),
            format!("give --identity (or set {IDENTITY_ENV} to) the path of a readable JSON identity file, or give --as, --tenant and --permission instead"),
        )
    })?;
    parse(&text).map_err(|why| {
        Failure::usage(
            format!("the identity file {shown} is not a valid identity"),
            why,
            "write it as {\"tenant\": \"acme\", \"user\": \"manager\", \"permissions\": [\"refund:approve\"]}",
        )
    })
}

/// The identity in the JSON text of an identity file, or why it is not one.
fn parse(text: &str) -> Result<AuthContext, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("it is not JSON ({e})"))?;
    let Value::Object(fields) = value else {
        return Err("it is not a JSON object".to_owned());
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["tenant", "user", "permissions"].contains(&k.as_str()))
    {
        return Err(format!(
            "it has the unknown field `{unknown}`; the fields are `tenant`, `user` and `permissions`"
        ));
    }
    let text_field = |name: &str| match fields.get(name) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(_) => Err(format!("`{name}` must be a non-empty string")),
        None => Err(format!("it lacks `{name}`")),
    };
    let tenant = text_field("tenant")?;
    let user = text_field("user")?;
    let permissions = match fields.get("permissions") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                _ => Err("`permissions` must be an array of strings".to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("`permissions` must be an array of strings".to_owned()),
        None => return Err("it lacks `permissions` (an empty array if none)".to_owned()),
    };
    Ok(AuthContext::new(tenant, user).with_permissions(permissions))
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
            format!("{verb} as an operator who holds `{permission}`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(user: Option<&str>, tenant: Option<&str>, permissions: &[&str]) -> IdentityFlags {
        IdentityFlags {
            user: user.map(str::to_owned),
            tenant: tenant.map(str::to_owned),
            permissions: permissions.iter().map(|p| (*p).to_owned()).collect(),
            file: None,
        }
    }

    fn with_file(flags: IdentityFlags, file: &str) -> IdentityFlags {
        IdentityFlags {
            file: Some(file.into()),
            ..flags
        }
    }

    fn describe(operator: &Operator) -> (String, String, Vec<String>) {
        let auth = operator.auth();
        (
            auth.tenant().to_owned(),
            auth.user().to_owned(),
            auth.permissions().map(str::to_owned).collect(),
        )
    }

    #[test]
    fn flags_make_an_identity() {
        let auth = resolve(&flags(Some("manager"), Some("acme"), &["refund:approve"])).unwrap();
        assert_eq!(
            describe(&auth),
            (
                "acme".into(),
                "manager".into(),
                vec!["refund:approve".into()]
            )
        );
        // An empty TOOLGATE_IDENTITY is no file.
        assert!(resolve(&with_file(flags(Some("m"), Some("acme"), &[]), "")).is_ok());
    }

    #[test]
    fn an_incomplete_or_missing_or_doubled_identity_is_a_usage_error() {
        for given in [
            flags(Some("manager"), None, &[]),
            flags(None, Some("acme"), &["refund:approve"]),
            flags(Some(" "), Some("acme"), &[]),
            flags(None, None, &[]),
        ] {
            let err = resolve(&given).expect_err("incomplete");
            assert_eq!(err.exit_code(), 2, "{given:?}");
        }
        let err = resolve(&with_file(flags(Some("m"), None, &[]), "/some/file.json")).unwrap_err();
        assert!(err.to_string().contains("given twice"), "{err}");
        let err =
            resolve(&with_file(flags(None, None, &[]), "/no/such/identity.json")).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("/no/such/identity.json"), "{err}");
    }

    #[test]
    fn an_identity_file_is_read_strictly() {
        let auth =
            parse(r#"{"tenant": "acme", "user": "manager", "permissions": ["refund:approve"]}"#)
                .unwrap();
        assert_eq!(
            (
                auth.tenant().to_owned(),
                auth.user().to_owned(),
                auth.permissions().map(str::to_owned).collect::<Vec<_>>()
            ),
            (
                "acme".into(),
                "manager".into(),
                vec!["refund:approve".into()]
            )
        );
        let bad = [
            ("[]", "not a JSON object"),
            ("{", "not JSON"),
            (r#"{"user": "m", "permissions": []}"#, "lacks `tenant`"),
            (r#"{"tenant": "acme", "permissions": []}"#, "lacks `user`"),
            (r#"{"tenant": "acme", "user": "m"}"#, "lacks `permissions`"),
            (
                r#"{"tenant": "", "user": "m", "permissions": []}"#,
                "`tenant` must be",
            ),
            (
                r#"{"tenant": "acme", "user": "m", "permissions": [1]}"#,
                "array of strings",
            ),
            (
                r#"{"tenant": "acme", "user": "m", "permissions": [], "role": "x"}"#,
                "unknown field `role`",
            ),
        ];
        for (text, why) in bad {
            let err = parse(text).expect_err(text);
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
