//! Approvals: the policy a tool declares (`approval_over`), the amount it compares, deciding an
//! approval, and the runner of approved operations. The guide is
//! [`toolgate::guide::approvals`](../guide/approvals/index.html).

pub use crate::decide::decide;
pub use crate::descriptor::ApprovalPolicy;
pub use crate::dispatch::runner::{ApprovedRun, Executed};

/// A type that can hold the amount `approval_over` compares against its threshold.
///
/// Implemented for Rust's integer and float types; implement it for a decimal or money type of
/// your own to use it as an `approval_field`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold the amount that `approval_over` compares",
    label = "not a numeric type",
    note = "name a numeric argument with `approval_field = <argument>`, or implement `toolgate::approval::ApprovalAmount` for `{Self}`"
)]
pub trait ApprovalAmount {
    /// The amount as a float, for comparison with the threshold.
    fn approval_amount(&self) -> f64;
}

macro_rules! numeric {
    ($($ty:ty),*) => {
        $(impl ApprovalAmount for $ty {
            #[allow(clippy::cast_precision_loss, clippy::cast_lossless)]
            fn approval_amount(&self) -> f64 {
                *self as f64
            }
        })*
    };
}

numeric!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);
