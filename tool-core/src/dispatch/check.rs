//! A tool's business check (`check = path`): run after authorisation and before a write claims
//! its key (or a read runs), and again before an approved operation runs.

use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::registry::RegisteredTool;

use super::{Dispatcher, answers};

impl Dispatcher {
    /// The tool's business check on `args`, under the tool's deadline: `Ok(())` for a tool
    /// without one. Its error (a `refused`, a `not_found`, …) is the call's answer: nothing was
    /// stored or sent. A check that panics is an `internal` error.
    pub(super) async fn check(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        args: &Value,
    ) -> Result<(), ToolError> {
        let Some(check) = registered.tool().check(ctx, args) else {
            return Ok(());
        };
        let name = registered.descriptor().name;
        let deadline = self.timeout_of(registered);
        let guarded = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(check));
        match tokio::time::timeout(deadline, guarded).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(payload)) => {
                super::unwind::trace(name, &*payload);
                Err(answers::check_panicked(name))
            }
            Err(_elapsed) => Err(answers::check_timed_out(name, deadline)),
        }
    }
}
