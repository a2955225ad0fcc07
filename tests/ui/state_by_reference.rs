use toolgate::prelude::*;

struct Shop;

/// Name the shop.
#[tool]
async fn shop_name(shop: &State<Shop>) -> Result<String, ToolError> {
    let _ = shop;
    Ok(String::new())
}

fn main() {}
