//! A proven operator, what proves one, and why a credential was refused.

use serde::{Deserialize, Serialize};

use crate::auth::AuthContext;
use crate::identifier::identifier_flaw;

/// What a credential says of its holder, once an [`Authenticator`] checked it: the claims of an
/// operator token (a JWT's `iss`, `sub`, `iat` and `exp`, in seconds since the epoch, and
/// toolgate's `tenant` and `permissions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Who issued the credential: an issuer of operator tokens, or the application's login.
    pub iss: String,
    /// Whom it was issued to: an identifier, compared exactly.
    pub sub: String,
    /// The tenant the holder acts in.
    pub tenant: String,
    /// What the holder may do (`refund:approve`, `ops:settle`, `outbox:resume`, …).
    #[serde(default)]
    pub permissions: Vec<String>,
    /// When it was issued, in seconds since the epoch.
    pub iat: i64,
    /// When it stops being accepted, in seconds since the epoch.
    pub exp: i64,
}

/// Checks a credential and says whose it is. [`TokenVerifier`](super::TokenVerifier) checks
/// operator tokens; an application with a login of its own implements it over that login.
/// [`Operator::authenticate`] is the only way to an [`Operator`], so whatever decides or acts
/// by hand has passed through one.
pub trait Authenticator: Send + Sync {
    /// The claims of `credential`, checked as of `now_ms` (milliseconds since the epoch); an
    /// error says why it is refused.
    fn authenticate(&self, credential: &str, now_ms: i64) -> Result<Claims, IdentityError>;
}

/// Why a credential was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// It is not a token of the form `header.claims.signature`, or a part does not read.
    #[error("the token is not an operator token: {0}")]
    Malformed(String),
    /// Its header names another algorithm than EdDSA (`none` for an unsigned one).
    #[error("the token is not signed with EdDSA (its header names {0:?})")]
    Unsigned(String),
    /// No issuer key the verifier holds verifies it: signed by another key, changed since it
    /// was signed, or claiming another issuer or tenant than its key's.
    #[error("the token was not signed by a known issuer key: {0}")]
    ForeignKey(String),
    /// It expired (at `exp`, in seconds since the epoch).
    #[error("the token expired at {exp} (seconds since the epoch)")]
    Expired {
        /// When it expired.
        exp: i64,
    },
    /// Its subject or tenant is not an identifier.
    #[error("the token's {field} {value:?} is not an identifier: {flaw}")]
    NotAnIdentifier {
        /// `subject` or `tenant`.
        field: &'static str,
        /// As the token gives it.
        value: String,
        /// What is wrong with it ([`identifier_flaw`]).
        flaw: &'static str,
    },
    /// An application's authenticator refused the credential, for the reason it gives.
    #[error("the credential was refused: {0}")]
    Refused(String),
}

impl IdentityError {
    /// What the holder does next.
    pub fn next(&self) -> &'static str {
        match self {
            IdentityError::Malformed(_) | IdentityError::Unsigned(_) => {
                "pass the whole token its issuer signed (three base64url parts joined by dots)"
            }
            IdentityError::ForeignKey(_) => {
                "ask for a token signed with an issuer key the verifier holds, for the tenant you act in"
            }
            IdentityError::Expired { .. } => "ask your issuer for a new token",
            IdentityError::NotAnIdentifier { .. } => {
                "issue the token to a subject and tenant with no space, control or invisible character"
            }
            IdentityError::Refused(_) => "sign in again through the application's login",
        }
    }
}

/// An operator whose identity an [`Authenticator`] proved: their subject, tenant and
/// permissions, and the issuer that vouches for them. Made only by
/// [`Operator::authenticate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    auth: AuthContext,
    issuer: String,
    expires_ms: i64,
}

impl Operator {
    /// The operator `credential` proves, as `authenticator` checks it at `now_ms`: refused when
    /// the authenticator refuses it, when it expired, or when its subject or tenant is not an
    /// identifier ([`identifier_flaw`]).
    pub fn authenticate(
        authenticator: &dyn Authenticator,
        credential: &str,
        now_ms: i64,
    ) -> Result<Operator, IdentityError> {
        let claims = authenticator.authenticate(credential, now_ms)?;
        // Whatever the authenticator, an expired credential and a name that reads as another's
        // are refused here too.
        if claims.exp.saturating_mul(1000) <= now_ms {
            return Err(IdentityError::Expired { exp: claims.exp });
        }
        for (field, value) in [("subject", &claims.sub), ("tenant", &claims.tenant)] {
            if let Some(flaw) = identifier_flaw(value) {
                return Err(IdentityError::NotAnIdentifier {
                    field,
                    value: value.clone(),
                    flaw,
                });
            }
        }
        Ok(Operator {
            auth: AuthContext::new(claims.tenant, claims.sub).with_permissions(claims.permissions),
            issuer: claims.iss,
            expires_ms: claims.exp.saturating_mul(1000),
        })
    }

    /// Whom the credential was issued to.
    pub fn subject(&self) -> &str {
        self.auth.user()
    }

    /// The tenant the operator acts in.
    pub fn tenant(&self) -> &str {
        self.auth.tenant()
    }

    /// Who vouches for the operator: the token's issuer, or the application's login.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The operator as an authorisation context: tenant, subject as user, permissions.
    pub fn auth(&self) -> &AuthContext {
        &self.auth
    }

    /// When the credential stops being accepted, in milliseconds since the epoch: a console's
    /// session of this operator ends then at the latest.
    pub fn expires_ms(&self) -> i64 {
        self.expires_ms
    }

    /// Whether the operator holds `permission`.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.auth.has_permission(permission)
    }

    /// `auth` as an operator vouched for by `tests`, for this crate's unit tests.
    #[cfg(test)]
    pub(crate) fn for_test(auth: AuthContext) -> Operator {
        Operator {
            auth,
            issuer: "tests".into(),
            expires_ms: i64::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers the claims it holds, whatever the credential: an application's login, as far as
    /// these tests need one.
    struct Login(Claims);

    impl Authenticator for Login {
        fn authenticate(&self, _credential: &str, _now_ms: i64) -> Result<Claims, IdentityError> {
            Ok(self.0.clone())
        }
    }

    fn claims(sub: &str) -> Claims {
        Claims {
            iss: "acme-login".into(),
            sub: sub.into(),
            tenant: "acme".into(),
            permissions: vec!["refund:approve".into()],
            iat: 1_000,
            exp: 2_000,
        }
    }

    #[test]
    fn an_application_login_proves_an_operator_with_its_issuer() {
        let operator =
            Operator::authenticate(&Login(claims("manager")), "cookie", 1_500_000).unwrap();
        assert_eq!(operator.subject(), "manager");
        assert_eq!(operator.issuer(), "acme-login");
        assert_eq!(operator.expires_ms(), 2_000_000);
        assert!(operator.has_permission("refund:approve"));
    }

    #[test]
    fn whatever_the_authenticator_an_expired_credential_or_a_look_alike_name_is_refused() {
        let expired = Operator::authenticate(&Login(claims("manager")), "cookie", 2_000_000);
        assert_eq!(expired, Err(IdentityError::Expired { exp: 2_000 }));
        let renamed = Operator::authenticate(&Login(claims("agent\u{200b}")), "cookie", 1_500_000);
        assert!(
            matches!(
                renamed,
                Err(IdentityError::NotAnIdentifier {
                    field: "subject",
                    ..
                })
            ),
            "{renamed:?}"
        );
    }
}
