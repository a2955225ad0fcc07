use toolgate::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Refund {
    /// The order to refund.
    order_id: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Note {
    /// A note for the customer.
    text: String,
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write")]
async fn issue_refund(Args(refund): Args<Refund>, Args(note): Args<Note>) -> Result<String, ToolError> {
    Ok(format!("{}: {}", refund.order_id, note.text))
}

fn main() {}
