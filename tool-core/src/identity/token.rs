//! The check of an operator token: a JWT (compact JWS, RFC 7515) signed with EdDSA by an issuer
//! key the verifier holds.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::Signature;
use serde::Deserialize;

use super::issuer::IssuerKey;
use super::operator::{Authenticator, Claims, IdentityError};

/// Checks operator tokens against the issuer keys it is given: the header names
/// EdDSA and one of the keys, the signature verifies with it, the claims name that key's issuer
/// and tenant, and the token has not expired.
/// [`Operator::authenticate`](super::Operator::authenticate) turns what it answers into an
/// operator.
#[derive(Debug, Clone, Default)]
pub struct TokenVerifier {
    keys: Vec<IssuerKey>,
}

/// What a token's header says.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

impl TokenVerifier {
    /// A verifier of the tokens `keys` signed.
    pub fn new(keys: Vec<IssuerKey>) -> TokenVerifier {
        TokenVerifier { keys }
    }

    /// The tenant `token` claims, unchecked: whose issuer keys to check it with (a store keeps
    /// them per tenant, and answers them with `IssuerKeyStore::issuer_keys`).
    /// Nothing else may be taken from it before a verifier built with those keys accepts the
    /// token, which also refuses a tenant claim its key was not issued for.
    pub fn claimed_tenant(token: &str) -> Result<String, IdentityError> {
        #[derive(Deserialize)]
        struct Tenant {
            tenant: String,
        }
        let claims = token.trim().split('.').nth(1).ok_or_else(|| {
            IdentityError::Malformed("a token is three base64url parts joined by dots".into())
        })?;
        Ok(decode_json::<Tenant>(claims, "claims")?.tenant)
    }
}

impl Authenticator for TokenVerifier {
    fn authenticate(&self, token: &str, now_ms: i64) -> Result<Claims, IdentityError> {
        let token = token.trim();
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(IdentityError::Malformed(
                "a token is three base64url parts joined by dots".into(),
            ));
        };
        let header: Header = decode_json(header, "header")?;
        if header.alg != "EdDSA" {
            return Err(IdentityError::Unsigned(header.alg));
        }
        let kid = header.kid.unwrap_or_default();
        let Some(key) = self.keys.iter().find(|key| key.kid() == kid) else {
            return Err(IdentityError::ForeignKey(format!(
                "its header names the key {kid:?}, which is not one of the issuer keys held"
            )));
        };
        let signature = B64
            .decode(signature)
            .ok()
            .and_then(|bytes| Signature::from_slice(&bytes).ok())
            .ok_or_else(|| IdentityError::Malformed("its signature does not read".into()))?;
        let signed = &token[..token.rfind('.').expect("three parts")];
        key.verifying_key()?
            .verify_strict(signed.as_bytes(), &signature)
            .map_err(|_| {
                IdentityError::ForeignKey(format!(
                    "its signature does not verify with the key of {} (tenant {}): it was signed by another key, or changed since",
                    key.issuer, key.tenant
                ))
            })?;
        let claims: Claims = decode_json(claims, "claims")?;
        if claims.iss != key.issuer || claims.tenant != key.tenant {
            return Err(IdentityError::ForeignKey(format!(
                "it claims issuer {} of tenant {}, and its key is {}'s of tenant {}",
                claims.iss, claims.tenant, key.issuer, key.tenant
            )));
        }
        if claims.exp.saturating_mul(1000) <= now_ms {
            return Err(IdentityError::Expired { exp: claims.exp });
        }
        Ok(claims)
    }
}

/// The JSON of the token part `part` (`header`, `claims`).
fn decode_json<T: serde::de::DeserializeOwned>(text: &str, part: &str) -> Result<T, IdentityError> {
    let bytes = B64
        .decode(text)
        .map_err(|err| IdentityError::Malformed(format!("its {part} is not base64url: {err}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|err| IdentityError::Malformed(format!("its {part} does not read: {err}")))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::identity::{IssuerSecret, Operator};

    const NOW_MS: i64 = 1_800_000_000_000;
    const HOUR: Duration = Duration::from_secs(3600);

    fn issued(secret: &IssuerSecret, subject: &str) -> String {
        secret
            .issue(subject, &["refund:approve"], HOUR, NOW_MS)
            .unwrap()
    }

    #[test]
    fn a_token_of_a_known_key_proves_its_subject_until_it_expires() {
        let acme = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let verifier = TokenVerifier::new(vec![acme.public()]);
        let token = issued(&acme, "manager");
        let manager = Operator::authenticate(&verifier, &token, NOW_MS).unwrap();
        assert_eq!(
            (manager.subject(), manager.tenant(), manager.issuer()),
            ("manager", "acme", "acme-ops")
        );
        let expired = verifier.authenticate(&token, NOW_MS + 3_600_000);
        assert!(
            matches!(expired, Err(IdentityError::Expired { .. })),
            "{expired:?}"
        );
    }

    #[test]
    fn a_token_of_another_key_changed_or_unsigned_is_refused() {
        let acme = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let stranger = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let globex = IssuerSecret::generate("globex-ops", "globex").unwrap();
        let verifier = TokenVerifier::new(vec![acme.public()]);

        // Signed by a key the store does not hold, though it claims the same issuer.
        let foreign = verifier.authenticate(&issued(&stranger, "manager"), NOW_MS);
        assert!(
            matches!(foreign, Err(IdentityError::ForeignKey(_))),
            "{foreign:?}"
        );
        let other_tenant = verifier.authenticate(&issued(&globex, "manager"), NOW_MS);
        assert!(
            matches!(other_tenant, Err(IdentityError::ForeignKey(_))),
            "{other_tenant:?}"
        );

        // The claims changed after signing: the requester names itself the manager.
        let token = issued(&acme, "agent");
        let [header, claims, signature]: [&str; 3] =
            token.split('.').collect::<Vec<_>>().try_into().unwrap();
        let claims = String::from_utf8(B64.decode(claims).unwrap()).unwrap();
        let renamed = B64.encode(claims.replace("\"agent\"", "\"manager\""));
        let changed = verifier.authenticate(&format!("{header}.{renamed}.{signature}"), NOW_MS);
        assert!(
            matches!(changed, Err(IdentityError::ForeignKey(_))),
            "{changed:?}"
        );

        // Unsigned: `alg: none`, and no signature.
        let none = B64.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let claims = B64.encode(claims);
        let unsigned = verifier.authenticate(&format!("{none}.{claims}."), NOW_MS);
        assert_eq!(unsigned, Err(IdentityError::Unsigned("none".into())));

        for garbage in ["", "manager", "a.b", "a.b.c.d", "!!.!!.!!"] {
            let refused = verifier.authenticate(garbage, NOW_MS);
            assert!(
                matches!(refused, Err(IdentityError::Malformed(_))),
                "{garbage:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_claimed_tenant_is_read_unchecked() {
        let acme = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let token = issued(&acme, "manager");
        assert_eq!(TokenVerifier::claimed_tenant(&token).as_deref(), Ok("acme"));
        for garbage in ["", "manager", "a.!!.c", "a.e30.c"] {
            let refused = TokenVerifier::claimed_tenant(garbage);
            assert!(
                matches!(refused, Err(IdentityError::Malformed(_))),
                "{garbage:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn a_claim_of_another_issuer_or_tenant_than_the_key_is_refused() {
        // A key whose record names another tenant than the one its holder signs for: the
        // store's record of the key is what counts.
        let acme = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let mut recorded = acme.public();
        recorded.tenant = "globex".into();
        let verifier = TokenVerifier::new(vec![recorded]);
        let refused = verifier.authenticate(&issued(&acme, "manager"), NOW_MS);
        assert!(
            matches!(refused, Err(IdentityError::ForeignKey(_))),
            "{refused:?}"
        );
    }
}
