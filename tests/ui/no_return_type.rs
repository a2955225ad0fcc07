use toolgate::prelude::*;

/// Send a notification.
#[tool(side_effect = "write")]
async fn notify(message: String) {
    println!("{message}");
}

fn main() {}
