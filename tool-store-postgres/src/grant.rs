//! The grant of a turn as `toolgate_begin_turn` answers it, read from its row: for beginning a
//! turn alone and for beginning it with the claim of its one write.

use sqlx::postgres::PgRow;
use toolgate_core::RunLimits;
use toolgate_core::run::RunAborted;
use toolgate_core::store::{Admission, FailedCall, StoreError, TurnGrant};

use crate::row::{count, get};

/// The grant in `row`, which holds the columns `toolgate_begin_turn` answers, for a turn under
/// `limits`.
pub(crate) fn grant_of(row: &PgRow, limits: RunLimits) -> Result<TurnGrant, StoreError> {
    let outcome: String = get(row, "outcome")?;
    match outcome.as_str() {
        "aborted" => Ok(TurnGrant::Aborted(RunAborted::from_stored(
            &get::<String>(row, "aborted_kind")?,
            abort_reason(get(row, "aborted_reason")?)?,
        ))),
        "step_limit" => Ok(TurnGrant::StepLimit {
            max_steps: limits.max_steps.unwrap_or_default(),
        }),
        "call_limit" => Ok(TurnGrant::CallLimit {
            used: count(get(row, "used")?, "tool_calls")?,
            max_tool_calls: limits.max_tool_calls.unwrap_or_default(),
        }),
        "admitted" => {
            let granted: Vec<i64> = get(row, "granted")?;
            let failed_tools: Vec<String> = get(row, "failed_tools")?;
            let failed_hashes: Vec<String> = get(row, "failed_hashes")?;
            Ok(TurnGrant::Admitted(Admission {
                step: count(get(row, "step")?, "steps")?,
                granted: granted
                    .into_iter()
                    .map(|granted| count(granted, "attempts"))
                    .collect::<Result<_, _>>()?,
                failed: failed_tools
                    .into_iter()
                    .zip(failed_hashes)
                    .map(|(tool, request_hash)| FailedCall { tool, request_hash })
                    .collect(),
            }))
        }
        other => Err(StoreError::Corrupt(format!(
            "toolgate_begin_turn answered {other:?}"
        ))),
    }
}

/// A stored abort's reason, kept as a JSON string.
pub(crate) fn abort_reason(reason: String) -> Result<String, StoreError> {
    serde_json::from_str::<String>(&reason)
        .map_err(|err| StoreError::Corrupt(format!("aborted_reason {reason:?}: {err}")))
}
