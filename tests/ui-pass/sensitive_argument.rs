//! `#[sensitive]` marks an argument that traces and audit records redact; the fn keeps it.

use toolgate::prelude::*;

/// Verify a customer's identity.
#[tool]
async fn verify_customer(
    /// The customer's email.
    email: String,
    /// The customer's date of birth, `YYYY-MM-DD`.
    #[sensitive]
    date_of_birth: String,
    /// The last four digits of the card on file.
    #[sensitive]
    card_last4: Option<String>,
) -> Result<bool, ToolError> {
    Ok(!email.is_empty() && !date_of_birth.is_empty() && card_last4.is_some())
}

fn main() {
    let d = verify_customer::descriptor();
    assert_eq!(d.sensitive, &["date_of_birth", "card_last4"]);
    assert_eq!(d.params, &["email", "date_of_birth", "card_last4"]);
}
