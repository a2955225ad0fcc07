use toolgate::prelude::*;

/// Verify a customer's identity.
#[tool]
async fn verify_customer(email: String, #[sensitve] date_of_birth: String) -> Result<bool, ToolError> {
    Ok(!email.is_empty() && !date_of_birth.is_empty())
}

fn main() {}
