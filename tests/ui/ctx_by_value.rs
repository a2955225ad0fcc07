use toolgate::prelude::*;

/// Look up an order by its id.
#[tool]
async fn get_order(ctx: Ctx, order_id: String) -> Result<String, ToolError> {
    Ok(format!("{}: {order_id}", ctx.run_id()))
}

fn main() {}
