//! An issuer of operator tokens: its Ed25519 key pair, the public half kept with the store, the
//! secret half in a file of its own, each written as a JSON Web Key (RFC 8037) with the issuer's
//! name and tenant.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::operator::{Claims, IdentityError};
use crate::identifier::identifier_flaw;

/// The public key of an issuer of operator tokens, as the store keeps it: the key, the issuer's
/// name and the tenant its tokens act in. Its key id ([`IssuerKey::kid`]) is the key's JWK
/// thumbprint (RFC 7638), which a token names in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerKey {
    /// The issuer's name: the `iss` of the tokens it signs.
    pub issuer: String,
    /// The tenant of the tokens it signs.
    pub tenant: String,
    /// The Ed25519 public key.
    pub public_key: [u8; 32],
}

/// An issuer key as JSON: a JSON Web Key of type OKP, curve Ed25519 (`x` the public key, `d`
/// the secret seed, in the secret file only), with the issuer's name and tenant.
#[derive(Serialize, Deserialize)]
struct Jwk {
    kty: String,
    crv: String,
    x: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    d: Option<String>,
    kid: String,
    iss: String,
    tenant: String,
}

impl IssuerKey {
    /// The key id: the JWK thumbprint of the public key (RFC 7638: SHA-256 over the required
    /// members in order, base64url).
    pub fn kid(&self) -> String {
        let canonical = format!(
            r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
            B64.encode(self.public_key)
        );
        B64.encode(Sha256::digest(canonical.as_bytes()))
    }

    /// The key as its JSON Web Key text, as the store keeps it.
    pub fn to_jwk(&self) -> String {
        serde_json::to_string(&self.jwk(None)).expect("a key serializes")
    }

    /// The key of a JSON Web Key text [`IssuerKey::to_jwk`] wrote; a secret one's `d` is
    /// ignored.
    pub fn from_jwk(text: &str) -> Result<IssuerKey, IdentityError> {
        let jwk: Jwk = serde_json::from_str(text).map_err(|err| {
            IdentityError::Malformed(format!("an issuer key does not read: {err}"))
        })?;
        IssuerKey::of(&jwk)
    }

    fn of(jwk: &Jwk) -> Result<IssuerKey, IdentityError> {
        if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
            return Err(IdentityError::Malformed(format!(
                "an issuer key is an Ed25519 key (kty OKP, crv Ed25519), not kty {} crv {}",
                jwk.kty, jwk.crv
            )));
        }
        let key = IssuerKey {
            issuer: jwk.iss.clone(),
            tenant: jwk.tenant.clone(),
            public_key: bytes_32(&jwk.x, "x")?,
        };
        if key.kid() != jwk.kid {
            return Err(IdentityError::Malformed(
                "an issuer key's kid is not its thumbprint".into(),
            ));
        }
        Ok(key)
    }

    fn jwk(&self, d: Option<String>) -> Jwk {
        Jwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x: B64.encode(self.public_key),
            d,
            kid: self.kid(),
            iss: self.issuer.clone(),
            tenant: self.tenant.clone(),
        }
    }

    /// The key to verify signatures with.
    pub(super) fn verifying_key(&self) -> Result<VerifyingKey, IdentityError> {
        VerifyingKey::from_bytes(&self.public_key)
            .map_err(|_| IdentityError::Malformed("an issuer key is not a point of Ed25519".into()))
    }
}

/// The secret key of an issuer of operator tokens, which signs them
/// ([`IssuerSecret::issue`]). Keep it where only the issuer reads it ([`IssuerSecret::to_jwk`]);
/// whoever checks tokens needs only the public half ([`IssuerSecret::public`]).
pub struct IssuerSecret {
    key: IssuerKey,
    signing: SigningKey,
}

impl std::fmt::Debug for IssuerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerSecret")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl IssuerSecret {
    /// A new key pair for the issuer `issuer` of tenant `tenant`, from the system's randomness;
    /// refused when either is not an identifier or the system has no randomness to give.
    pub fn generate(issuer: &str, tenant: &str) -> Result<IssuerSecret, IdentityError> {
        for (field, value) in [("issuer", issuer), ("tenant", tenant)] {
            if let Some(flaw) = identifier_flaw(value) {
                return Err(IdentityError::NotAnIdentifier {
                    field,
                    value: value.to_owned(),
                    flaw,
                });
            }
        }
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|err| {
            IdentityError::Refused(format!("the system gave no randomness for a key: {err}"))
        })?;
        let signing = SigningKey::from_bytes(&seed);
        Ok(IssuerSecret {
            key: IssuerKey {
                issuer: issuer.to_owned(),
                tenant: tenant.to_owned(),
                public_key: signing.verifying_key().to_bytes(),
            },
            signing,
        })
    }

    /// The public half, for the store.
    pub fn public(&self) -> IssuerKey {
        self.key.clone()
    }

    /// The secret key as its JSON Web Key text (with `d`), for a file only its owner reads.
    pub fn to_jwk(&self) -> String {
        let d = B64.encode(self.signing.to_bytes());
        serde_json::to_string(&self.key.jwk(Some(d))).expect("a key serializes")
    }

    /// The secret key of a JSON Web Key text [`IssuerSecret::to_jwk`] wrote.
    pub fn from_jwk(text: &str) -> Result<IssuerSecret, IdentityError> {
        let jwk: Jwk = serde_json::from_str(text).map_err(|err| {
            IdentityError::Malformed(format!("an issuer key does not read: {err}"))
        })?;
        let key = IssuerKey::of(&jwk)?;
        let Some(d) = &jwk.d else {
            return Err(IdentityError::Malformed(
                "this is an issuer's public key; signing takes the secret key file".into(),
            ));
        };
        let signing = SigningKey::from_bytes(&bytes_32(d, "d")?);
        if signing.verifying_key().to_bytes() != key.public_key {
            return Err(IdentityError::Malformed(
                "the secret key file's d and x are not one key pair".into(),
            ));
        }
        Ok(IssuerSecret { key, signing })
    }

    /// A token for `subject` in this issuer's tenant, holding `permissions`, valid for
    /// `lifetime` from `now_ms`: a JWT signed with EdDSA, its header naming this key. Refused
    /// when `subject` or a permission is not an identifier.
    pub fn issue(
        &self,
        subject: &str,
        permissions: &[&str],
        lifetime: Duration,
        now_ms: i64,
    ) -> Result<String, IdentityError> {
        let names = std::iter::once(("subject", subject)).chain(
            permissions
                .iter()
                .map(|permission| ("permission", *permission)),
        );
        for (field, value) in names {
            if let Some(flaw) = identifier_flaw(value) {
                return Err(IdentityError::NotAnIdentifier {
                    field,
                    value: value.to_owned(),
                    flaw,
                });
            }
        }
        let iat = now_ms.div_euclid(1000);
        let lifetime = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
        let claims = Claims {
            iss: self.key.issuer.clone(),
            sub: subject.to_owned(),
            tenant: self.key.tenant.clone(),
            permissions: permissions.iter().map(|p| (*p).to_owned()).collect(),
            iat,
            exp: iat.saturating_add(lifetime),
        };
        let header = serde_json::json!({"alg": "EdDSA", "typ": "JWT", "kid": self.key.kid()});
        let signed = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(serde_json::to_string(&claims).expect("claims serialize"))
        );
        let signature = self.signing.sign(signed.as_bytes());
        Ok(format!("{signed}.{}", B64.encode(signature.to_bytes())))
    }
}

/// 32 bytes from the base64url text of the JWK member `member`.
fn bytes_32(text: &str, member: &str) -> Result<[u8; 32], IdentityError> {
    let bytes = B64.decode(text).map_err(|err| {
        IdentityError::Malformed(format!("an issuer key's {member} does not read: {err}"))
    })?;
    bytes
        .try_into()
        .map_err(|_| IdentityError::Malformed(format!("an issuer key's {member} is not 32 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_and_its_public_key_read_back_as_written() {
        let secret = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let public = IssuerKey::from_jwk(&secret.public().to_jwk()).unwrap();
        assert_eq!(public, secret.public());
        let again = IssuerSecret::from_jwk(&secret.to_jwk()).unwrap();
        assert_eq!(again.public(), secret.public());
        assert!(
            !secret.public().to_jwk().contains("\"d\""),
            "the public key holds no secret"
        );
        assert!(matches!(
            IssuerSecret::from_jwk(&secret.public().to_jwk()),
            Err(IdentityError::Malformed(_))
        ));
    }

    #[test]
    fn the_kid_is_the_rfc_7638_thumbprint() {
        // RFC 8037, appendix A.3: the thumbprint of its example Ed25519 key.
        let x = B64
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap();
        let key = IssuerKey {
            issuer: "i".into(),
            tenant: "t".into(),
            public_key: x.try_into().unwrap(),
        };
        assert_eq!(key.kid(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    }

    #[test]
    fn a_subject_or_permission_that_is_not_an_identifier_gets_no_token() {
        let secret = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let hour = Duration::from_secs(3600);
        assert!(secret.issue("agent ", &[], hour, 0).is_err());
        assert!(
            secret
                .issue("agent", &["refund:approve\u{200b}"], hour, 0)
                .is_err()
        );
        assert!(IssuerSecret::generate("acme ops", "acme").is_err());
    }
}
