use toolgate::prelude::*;

/// Look up an order line.
#[tool]
async fn get_line((order_id, line): (String, u32)) -> Result<String, ToolError> {
    Ok(format!("{order_id}#{line}"))
}

fn main() {}
