//! Who acts on the store by hand: an operator (an approver deciding, an operator settling an
//! unknown outcome or resuming a dead delivery) whose identity was proven, never typed.
//!
//! An [`Operator`] is made only by [`Operator::authenticate`], from a credential an
//! [`Authenticator`] checks: a token an issuer signed ([`TokenVerifier`], EdDSA JWTs checked
//! against the issuers' public keys the application gives it), or the application's own login
//! (an `Authenticator` of its own). The operators' `toolgate` (crate `toolgate-cli`) signs its
//! operators in with tokens: `toolgate operators init` makes a tenant's issuer (the secret key
//! in a file of its own, the public key in the store, which keeps issuers' keys as an
//! `IssuerKeyStore`), `toolgate operators issue` signs a token, and each command that decides or
//! acts takes one (`--token` or `TOOLGATE_TOKEN`), as the web console's sign-in page does, checked
//! against the keys the store holds for the tenant it claims.
//! An operator's subject is an identifier ([`identifier_flaw`]), compared exactly as it was
//! issued.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use toolgate::identity::{IssuerSecret, Operator, TokenVerifier};
//!
//! // The issuer keeps the secret; whoever checks tokens holds only the public key.
//! let secret = IssuerSecret::generate("acme-ops", "acme").unwrap();
//! let now_ms = 1_800_000_000_000;
//! let token = secret
//!     .issue("manager", &["refund:approve"], Duration::from_secs(3600), now_ms)
//!     .unwrap();
//!
//! let verifier = TokenVerifier::new(vec![secret.public()]);
//! let manager = Operator::authenticate(&verifier, &token, now_ms).unwrap();
//! assert_eq!((manager.subject(), manager.tenant()), ("manager", "acme"));
//! assert_eq!(manager.issuer(), "acme-ops");
//! assert!(manager.auth().has_permission("refund:approve"));
//!
//! // An hour later, the token is refused.
//! let later = now_ms + 3_600_000;
//! assert!(Operator::authenticate(&verifier, &token, later).is_err());
//! ```

mod issuer;
mod operator;
mod token;

pub use crate::identifier::identifier_flaw;
pub use issuer::{IssuerKey, IssuerSecret};
pub use operator::{Authenticator, Claims, IdentityError, Operator};
pub use token::TokenVerifier;
