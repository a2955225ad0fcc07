use toolgate::prelude::*;

/// Set a card's PIN.
#[tool(side_effect = "write", key = [card_id, pin])]
async fn set_pin(card_id: String, #[sensitive] pin: String) -> Result<String, ToolError> {
    Ok(format!("{card_id}: {} digits", pin.len()))
}

fn main() {}
