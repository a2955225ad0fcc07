//! A money type of the application's own can be the amount that `approval_over` compares, by
//! implementing `ApprovalAmount`; a `mut` binding is kept on the fn.

use serde::Deserialize;
use toolgate::approval::ApprovalAmount;
use toolgate::prelude::*;

/// An amount in cents.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
struct Cents(u64);

impl ApprovalAmount for Cents {
    fn approval_amount(&self) -> f64 {
        self.0 as f64 / 100.0
    }
}

/// Refund part or all of a paid order.
#[tool(side_effect = "write", approval_over = 500)]
async fn issue_refund(order_id: String, mut amount: Cents) -> Result<String, ToolError> {
    amount.0 += 0;
    Ok(format!("{order_id}: {}", amount.0))
}

fn main() {
    let d = issue_refund::descriptor();
    assert_eq!(
        d.approval.map(|a| (a.over, a.field)),
        Some((500.0, "amount"))
    );
    assert_eq!(Cents(1050).approval_amount(), 10.5);
}
