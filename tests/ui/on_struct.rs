use toolgate::prelude::*;

/// An order.
#[tool]
struct Order {
    id: String,
}

fn main() {}
