//! Operators for tests: proven by a login that vouches for whoever it is told to, so that a test
//! can decide or act as any identifier. Never an application's authenticator.

use toolgate_core::identity::{Authenticator, Claims, IdentityError, Operator};

/// The issuer the tests' operators are vouched for by, recorded with their decisions.
pub const TEST_ISSUER: &str = "toolgate-test";

/// A login that proves whatever it is asked to: the credential is ignored.
struct TestLogin<'a> {
    tenant: &'a str,
    subject: &'a str,
    permissions: &'a [&'a str],
}

impl Authenticator for TestLogin<'_> {
    fn authenticate(&self, _credential: &str, now_ms: i64) -> Result<Claims, IdentityError> {
        let now = now_ms.div_euclid(1000);
        Ok(Claims {
            iss: TEST_ISSUER.to_owned(),
            sub: self.subject.to_owned(),
            tenant: self.tenant.to_owned(),
            permissions: self.permissions.iter().map(|p| (*p).to_owned()).collect(),
            iat: now,
            exp: i64::MAX / 1000,
        })
    }
}

/// `subject` of `tenant` holding `permissions`, as an operator [`TEST_ISSUER`] vouches for.
/// Panics when `subject` or `tenant` is not an identifier (which no authenticator proves).
pub fn operator(tenant: &str, subject: &str, permissions: &[&str]) -> Operator {
    try_operator(tenant, subject, permissions)
        .unwrap_or_else(|err| panic!("{subject} of {tenant} is no operator: {err}"))
}

/// [`operator`], or why `subject` or `tenant` is not an identifier.
#[cfg_attr(not(feature = "chaos"), allow(dead_code))]
pub(crate) fn try_operator(
    tenant: &str,
    subject: &str,
    permissions: &[&str],
) -> Result<Operator, IdentityError> {
    let login = TestLogin {
        tenant,
        subject,
        permissions,
    };
    Operator::authenticate(&login, "", 0)
}
