//! The rules of [`IssuerKeyStore`](toolgate_core::store::IssuerKeyStore): the issuers' public
//! keys, kept per tenant, each once, in the order added.

use toolgate_core::identity::{IssuerKey, IssuerSecret, Operator, TokenVerifier};
use toolgate_core::store::OperationStore;

use super::fixture::T0;

/// A new key of the issuer `issuer` of `tenant`.
fn key(issuer: &str, tenant: &str) -> IssuerSecret {
    IssuerSecret::generate(issuer, tenant).expect("a key pair")
}

/// A tenant's keys are read back as added, in order; another tenant's are not among them; a
/// key added twice is kept once; and a token its key signed is proven with the keys read back.
pub async fn issuer_keys_are_kept_per_tenant_once_and_in_order(store: &dyn OperationStore) {
    let (first, second, other) = (
        key("acme-ops", "acme"),
        key("acme-hr", "acme"),
        key("globex-ops", "globex"),
    );
    assert!(store.issuer_keys("acme").await.expect("read").is_empty());
    for (secret, at) in [(&first, T0), (&other, T0 + 1), (&second, T0 + 2)] {
        assert!(
            store
                .add_issuer_key(&secret.public(), at)
                .await
                .expect("add")
        );
    }
    assert!(
        !store
            .add_issuer_key(&first.public(), T0 + 3)
            .await
            .expect("add again"),
        "a key held already is not added again"
    );
    let acme: Vec<IssuerKey> = store.issuer_keys("acme").await.expect("read");
    assert_eq!(acme, [first.public(), second.public()]);
    assert_eq!(
        store.issuer_keys("globex").await.expect("read"),
        [other.public()]
    );

    let now_ms = T0 + 10;
    let token = second
        .issue(
            "manager",
            &["refund:approve"],
            std::time::Duration::from_secs(60),
            now_ms,
        )
        .expect("a token");
    let manager =
        Operator::authenticate(&TokenVerifier::new(acme), &token, now_ms).expect("proven");
    assert_eq!(
        (manager.subject(), manager.issuer()),
        ("manager", "acme-hr")
    );
    let globex = TokenVerifier::new(store.issuer_keys("globex").await.expect("read"));
    assert!(
        Operator::authenticate(&globex, &token, now_ms).is_err(),
        "another tenant's keys prove no operator of acme"
    );
}
