//! One result per call id: when several calls of a turn share an id, a result could not be
//! matched to one of them, so none of them runs and the id gets one answer saying so.

use std::collections::HashMap;

use crate::call::{CallReport, ToolCall};
use crate::error::ToolError;
use crate::quote::excerpt;
use crate::result::CallResult;

/// The calls of a turn in which some ids are shared, split: the calls that run, and the one
/// report of each shared id, each with its place in the turn.
#[derive(Debug)]
pub(crate) struct Split {
    /// The calls whose id no other call of the turn has.
    pub(crate) runs: Vec<(usize, ToolCall)>,
    /// For each shared id, its report, at the place of its first call.
    pub(crate) answered: Vec<(usize, CallReport)>,
}

/// `calls` split by [`Split`], or given back whole when no two of them share an id.
pub(crate) fn split_shared(calls: Vec<ToolCall>) -> Result<Split, Vec<ToolCall>> {
    if calls.len() < 2 {
        return Err(calls);
    }
    let mut shared = shared_ids(&calls);
    if shared.is_empty() {
        return Err(calls);
    }
    let mut split = Split {
        runs: Vec::with_capacity(calls.len()),
        answered: Vec::with_capacity(shared.len()),
    };
    for (place, call) in calls.into_iter().enumerate() {
        match shared.iter_mut().find(|(id, _)| *id == call.id) {
            None => split.runs.push((place, call)),
            // The first call with a shared id answers for all of them; the others, nothing.
            Some((_, count)) if *count > 0 => {
                split.answered.push((place, shared_id_report(call, *count)));
                *count = 0;
            }
            Some(_) => {}
        }
    }
    Ok(split)
}

/// The ids that several of `calls` share, each with how many calls have it, in the order of
/// their first call.
fn shared_ids(calls: &[ToolCall]) -> Vec<(String, usize)> {
    // Comparing each pair costs less than hashing for the few calls of a usual turn.
    const FEW: usize = 16;
    let mut shared = Vec::new();
    if calls.len() <= FEW {
        for (place, call) in calls.iter().enumerate() {
            if calls[..place].iter().any(|other| other.id == call.id) {
                continue;
            }
            let count = calls[place..].iter().filter(|c| c.id == call.id).count();
            if count > 1 {
                shared.push((call.id.clone(), count));
            }
        }
        return shared;
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for call in calls {
        *counts.entry(call.id.as_str()).or_default() += 1;
    }
    for call in calls {
        if let Some(count) = counts.remove(call.id.as_str())
            && count > 1
        {
            shared.push((call.id.clone(), count));
        }
    }
    shared
}

/// The one report for an id that `count` calls of a turn share, none of which ran; `call` is the
/// first of them.
fn shared_id_report(call: ToolCall, count: usize) -> CallReport {
    tracing::warn!(
        gen_ai.tool.call.id = %call.id,
        calls = count,
        "one call id was given to several calls of a turn; none of them ran"
    );
    let err = ToolError::invalid_arguments(format!(
        "the call id {} was given to {count} calls in this turn",
        excerpt(&call.id)
    ))
    .with_why("a result could not be matched to one of them, so none of them ran")
    .with_next("fix the call ids: call the tools again, giving each call its own id");
    CallReport {
        call_id: call.id,
        tool: call.name,
        result: CallResult::from_error(&err),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn calls(ids: &[&str]) -> Vec<ToolCall> {
        ids.iter()
            .enumerate()
            .map(|(n, id)| ToolCall::new(*id, format!("tool_{n}"), json!({})))
            .collect()
    }

    #[test]
    fn shared_ids_and_what_runs_in_every_case() {
        // (ids of the turn, ids that run, ids answered without running)
        let cases: [(&[&str], &[&str], &[&str]); 6] = [
            (&[], &[], &[]),
            (&["a", "b", "c"], &["a", "b", "c"], &[]),
            (&["a", "a"], &[], &["a"]),
            (&["a", "b", "a", "c", "a"], &["b", "c"], &["a"]),
            (&["a", "b", "b", "a"], &[], &["a", "b"]),
            (&["", "x", ""], &["x"], &[""]),
        ];
        for (ids, runs, answered) in cases {
            match split_shared(calls(ids)) {
                Err(whole) => {
                    assert!(answered.is_empty(), "{ids:?}");
                    assert_eq!(whole, calls(ids));
                }
                Ok(split) => {
                    let ran: Vec<&str> = split.runs.iter().map(|(_, c)| c.id.as_str()).collect();
                    assert_eq!(ran, runs, "{ids:?}");
                    let said: Vec<&str> = split
                        .answered
                        .iter()
                        .map(|(_, r)| r.call_id.as_str())
                        .collect();
                    assert_eq!(said, answered, "{ids:?}");
                    // Each answer sits where the id first appeared, under the first call's tool.
                    for (place, report) in &split.answered {
                        assert_eq!(
                            ids.iter().position(|id| *id == report.call_id),
                            Some(*place)
                        );
                        assert_eq!(report.tool, format!("tool_{place}"));
                    }
                }
            }
        }
    }

    #[test]
    fn many_calls_are_counted_the_same_way() {
        let ids: Vec<String> = (0..40).map(|n| format!("c{}", n % 30)).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let split = split_shared(calls(&ids)).unwrap();
        assert_eq!(split.runs.len(), 20);
        assert_eq!(split.answered.len(), 10);
        let error = split.answered[0].1.result.error.as_ref().unwrap();
        assert_eq!(error.kind, "invalid_arguments");
        assert_eq!(
            error.what,
            r#"the call id "c0" was given to 2 calls in this turn"#
        );
        assert_eq!(
            error.why.as_deref(),
            Some("a result could not be matched to one of them, so none of them ran")
        );
        assert_eq!(
            error.next,
            "fix the call ids: call the tools again, giving each call its own id"
        );
    }
}
