//! The promises a played story is checked against: [`Played::check`], and the [`Applied`]
//! effects it is given.

use std::collections::BTreeMap;

use toolgate_core::ErrorKind;
use toolgate_core::store::OperationState;

use super::played::PlayedTurn;
use super::{Played, Violation, Violations};

/// One effect the provider applied, as its authoritative state tells: the business operation
/// (an id of the application's own, `"refund ORD-1001"`) and the idempotency key it was applied
/// under, when the tool passed one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Applied {
    /// The business operation, named so that two effects of the same operation have the same
    /// name.
    pub operation: String,
    /// The idempotency key the provider applied it under; `None` when the request carried none.
    pub key: Option<String>,
}

impl Applied {
    /// `operation` applied under `key`.
    pub fn new(operation: impl Into<String>, key: Option<impl Into<String>>) -> Applied {
        Applied {
            operation: operation.into(),
            key: key.map(Into::into),
        }
    }
}

impl Played {
    /// Checks the story against toolgate's promises, given the effects the provider applied
    /// (`provider` reads its authoritative state):
    ///
    /// - every call id of every turn is answered once, and no answer names an id the turn did
    ///   not ask for (a turn of a run already aborted answers none);
    /// - no business operation is applied more than once;
    /// - every applied effect is accounted for by a `succeeded` operation of the store under
    ///   its key, after the final reconcile;
    /// - no operation of a tool with a `reconcile` hook is still `outcome_unknown`;
    /// - no call refused before it ran (invalid arguments) reached the provider.
    ///
    /// The last check goes by the key the dispatcher derives for the refused call, as far as
    /// the record allows: a call whose arguments are not a JSON object has no key, and a
    /// refused call shares its key with any call of the same key fields, so it is checked
    /// only when no operation of the store holds that key (none ran under it). A refused call
    /// whose tool sends no key cannot be told from the provider's side; nor can one by its
    /// business operation, which the kit does not know a call's.
    ///
    /// # Errors
    ///
    /// [`Violations`]: every broken promise found, each with what usually causes it.
    pub fn check<I>(&self, provider: impl FnOnce() -> I) -> Result<(), Violations>
    where
        I: IntoIterator<Item = Applied>,
    {
        let applied: Vec<Applied> = provider().into_iter().collect();
        let mut found = Vec::new();
        for (line, turn) in self.turns() {
            found.extend(answered_once(line, turn));
        }
        found.extend(applied_once(&applied));
        let refused = self.refused_but_sent(&applied);
        found.extend(self.unaccounted(&applied, &refused));
        found.extend(self.still_unknown());
        found.extend(refused);
        match found.is_empty() {
            true => Ok(()),
            false => Err(Violations::new(found)),
        }
    }

    fn unaccounted(&self, applied: &[Applied], refused: &[Violation]) -> Vec<Violation> {
        let reported_refused = |key: &str| {
            refused
                .iter()
                .any(|violation| matches!(violation, Violation::RefusedButSent { key: k, .. } if k == key))
        };
        applied
            .iter()
            .filter_map(|effect| {
                let state = match &effect.key {
                    Some(key) if reported_refused(key) => return None,
                    Some(key) => self.operation(key).map(|operation| operation.state),
                    None => None,
                };
                (state != Some(OperationState::Succeeded)).then(|| Violation::Unaccounted {
                    operation: effect.operation.clone(),
                    key: effect.key.clone(),
                    state,
                })
            })
            .collect()
    }

    fn still_unknown(&self) -> Vec<Violation> {
        self.operations
            .iter()
            .filter(|operation| operation.state == OperationState::OutcomeUnknown)
            .filter(|operation| self.reconciled_tools.contains(&operation.tool))
            .map(|operation| Violation::StillUnknown {
                tool: operation.tool.clone(),
                key: operation.key.clone(),
                tries: operation.reconcile_tries,
            })
            .collect()
    }

    fn refused_but_sent(&self, applied: &[Applied]) -> Vec<Violation> {
        let mut found = Vec::new();
        for (line, turn) in self.turns() {
            for call in &turn.asked {
                let Some(key) = &call.key else { continue };
                let refused = turn.report(&call.id).is_some_and(|report| {
                    report.result.error_kind() == Some(ErrorKind::InvalidArguments)
                });
                if !refused || self.operation(key).is_some() {
                    continue;
                }
                let requests = self
                    .requests
                    .iter()
                    .filter(|request| request.key.as_ref() == Some(key))
                    .count();
                let effects = applied
                    .iter()
                    .filter(|effect| effect.key.as_ref() == Some(key))
                    .count();
                if requests + effects > 0 {
                    found.push(Violation::RefusedButSent {
                        line,
                        call_id: call.id.clone(),
                        tool: call.tool.clone(),
                        key: key.clone(),
                        requests,
                        effects,
                    });
                }
            }
        }
        found
    }
}

/// The call ids of `turn` not answered exactly once, and the answers to ids it did not ask.
fn answered_once(line: usize, turn: &PlayedTurn) -> Vec<Violation> {
    let answered = turn.answered_ids();
    if answered.is_empty() && matches!(turn.outcome, super::TurnOutcome::Aborted(_)) {
        // A turn of a run already aborted: none of its calls ran, and none is answered.
        return Vec::new();
    }
    let mut answers: BTreeMap<&str, (bool, usize)> = turn
        .asked
        .iter()
        .map(|call| (call.id.as_str(), (true, 0)))
        .collect();
    for id in answered {
        answers.entry(id).or_insert((false, 0)).1 += 1;
    }
    answers
        .into_iter()
        .filter_map(|(call_id, (asked, answers))| match (asked, answers) {
            (true, 1) => None,
            (true, answers) => Some(Violation::CallAnswered {
                line,
                call_id: call_id.to_owned(),
                answers,
            }),
            (false, _) => Some(Violation::AnsweredUnasked {
                line,
                call_id: call_id.to_owned(),
            }),
        })
        .collect()
}

/// The operations applied more than once.
fn applied_once(applied: &[Applied]) -> Vec<Violation> {
    let mut by_operation: BTreeMap<&str, Vec<Option<String>>> = BTreeMap::new();
    for effect in applied {
        by_operation
            .entry(&effect.operation)
            .or_default()
            .push(effect.key.clone());
    }
    by_operation
        .into_iter()
        .filter(|(_, keys)| keys.len() > 1)
        .map(|(operation, keys)| Violation::AppliedMoreThanOnce {
            operation: operation.to_owned(),
            keys,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use http::Method;
    use toolgate_core::dispatch::CallReport;
    use toolgate_core::reconcile::ReconcileReport;
    use toolgate_core::run::{RunAborted, TurnAborted};
    use toolgate_core::store::OperationRecord;
    use toolgate_core::tool::JsonText;
    use toolgate_core::{CallResult, ToolError};

    use super::*;
    use crate::chaos::played::{Answer, Answered, AskedCall, TurnOutcome};
    use crate::chaos::{Record, TurnFormat, Upstream};

    fn asked(id: &str, key: Option<&str>) -> AskedCall {
        AskedCall {
            id: id.to_owned(),
            tool: "refund".to_owned(),
            key: key.map(str::to_owned),
        }
    }

    fn report(id: &str, result: CallResult) -> CallReport {
        CallReport {
            call_id: id.to_owned(),
            tool: "refund".to_owned(),
            result,
        }
    }

    fn succeeded() -> CallResult {
        CallResult::succeeded(JsonText::of(&serde_json::json!({"refund_id": "re_1"})).unwrap())
    }

    fn refused() -> CallResult {
        CallResult::from_error(&ToolError::new(
            ErrorKind::InvalidArguments,
            "order_id is not a string",
        ))
    }

    fn operation(key: &str, tool: &str, state: OperationState) -> OperationRecord {
        OperationRecord {
            tenant: "acme".to_owned(),
            key: key.to_owned(),
            tool: tool.to_owned(),
            request_hash: "h".to_owned(),
            arguments: "{}".to_owned(),
            state,
            attempt: 1,
            lease_until_ms: 0,
            result: None,
            errors: Vec::new(),
            reconcile_tries: 2,
            created_ms: 0,
            updated_ms: 0,
            approval_id: None,
        }
    }

    fn turn(line: usize, asked: Vec<AskedCall>, outcome: TurnOutcome) -> Answered {
        Answered {
            line,
            process: "a".to_owned(),
            answer: Answer::Turn(PlayedTurn {
                format: TurnFormat::OpenAi,
                tenant: "acme".to_owned(),
                run: "run-1".to_owned(),
                asked,
                outcome,
            }),
        }
    }

    fn answered(reports: Vec<CallReport>) -> TurnOutcome {
        TurnOutcome::Answered {
            message: None,
            reports,
        }
    }

    fn played(answers: Vec<Answered>, operations: Vec<OperationRecord>) -> Played {
        Played {
            answers,
            final_reconcile: ReconcileReport::default(),
            operations,
            requests: Vec::new(),
            reconciled_tools: BTreeSet::from(["refund".to_owned()]),
        }
    }

    fn violations(played: &Played, applied: Vec<Applied>) -> Vec<Violation> {
        match played.check(|| applied) {
            Ok(()) => Vec::new(),
            Err(found) => found.into_vec(),
        }
    }

    #[test]
    fn every_call_id_of_a_turn_is_answered_once() {
        let turns = vec![
            turn(
                1,
                vec![asked("call_1", None), asked("call_2", None)],
                answered(vec![report("call_1", succeeded())]),
            ),
            turn(
                2,
                vec![asked("call_3", None)],
                answered(vec![
                    report("call_3", succeeded()),
                    report("call_3", succeeded()),
                    report("call_9", succeeded()),
                ]),
            ),
            // A turn of a run already aborted answers none of its calls.
            turn(
                3,
                vec![asked("call_4", None)],
                TurnOutcome::Aborted(TurnAborted {
                    reason: RunAborted {
                        kind: ErrorKind::PermissionDenied,
                        reason: "no refund:create".to_owned(),
                    },
                    calls: Vec::new(),
                }),
            ),
        ];
        let found = violations(&played(turns, Vec::new()), Vec::new());
        let answered = |line, id: &str, answers| Violation::CallAnswered {
            line,
            call_id: id.to_owned(),
            answers,
        };
        let unasked = Violation::AnsweredUnasked {
            line: 2,
            call_id: "call_9".to_owned(),
        };
        assert_eq!(
            found,
            [answered(1, "call_2", 0), answered(2, "call_3", 2), unasked]
        );
        assert!(found[0].to_string().contains("answered 0 times, not once"));
        assert!(found[2].to_string().contains("did not ask for"));
    }

    #[test]
    fn an_effect_is_accounted_for_by_a_succeeded_operation_under_its_key() {
        let operations = vec![
            operation("k_ok", "refund", OperationState::Succeeded),
            operation("k_failed", "refund", OperationState::Failed),
        ];
        let found = violations(
            &played(Vec::new(), operations),
            vec![
                Applied::new("refund ORD-1", Some("k_ok")),
                Applied::new("refund ORD-2", Some("k_failed")),
                Applied::new("refund ORD-3", Some("k_nowhere")),
                Applied::new("refund ORD-4", None::<String>),
            ],
        );
        let unaccounted = |order: &str, key: Option<&str>, state| Violation::Unaccounted {
            operation: format!("refund {order}"),
            key: key.map(str::to_owned),
            state,
        };
        assert_eq!(
            found,
            [
                unaccounted("ORD-2", Some("k_failed"), Some(OperationState::Failed)),
                unaccounted("ORD-3", Some("k_nowhere"), None),
                unaccounted("ORD-4", None, None),
            ]
        );
        assert!(
            found[1]
                .to_string()
                .contains("a key no operation of the store holds")
        );
    }

    #[test]
    fn an_unknown_outcome_left_is_a_violation_only_for_a_tool_with_a_hook() {
        let operations = vec![
            operation("k1", "refund", OperationState::OutcomeUnknown),
            operation("k2", "email", OperationState::OutcomeUnknown),
        ];
        let found = violations(&played(Vec::new(), operations), Vec::new());
        assert_eq!(
            found,
            [Violation::StillUnknown {
                tool: "refund".to_owned(),
                key: "k1".to_owned(),
                tries: 2,
            }]
        );
    }

    #[test]
    fn a_refused_call_that_reached_the_provider_is_found_by_its_key() {
        let turns = vec![turn(
            1,
            vec![
                asked("call_1", Some("k_refused")),
                asked("call_2", Some("k_ran_too")),
                asked("call_3", None),
            ],
            answered(vec![
                report("call_1", refused()),
                report("call_2", refused()),
                report("call_3", refused()),
            ]),
        )];
        // Another call with the same key fields ran: the refused one cannot be told from it.
        let operations = vec![operation("k_ran_too", "refund", OperationState::Succeeded)];
        let mut played = played(turns, operations);
        played.requests.push(Record {
            method: Method::POST,
            path: "/refunds".to_owned(),
            key: Some("k_refused".to_owned()),
            fault: None,
            upstream: Upstream::Answered(http::StatusCode::OK),
        });
        let found = violations(
            &played,
            vec![
                Applied::new("refund ORD-1", Some("k_refused")),
                Applied::new("refund ORD-2", Some("k_ran_too")),
            ],
        );
        assert_eq!(
            found,
            [Violation::RefusedButSent {
                line: 1,
                call_id: "call_1".to_owned(),
                tool: "refund".to_owned(),
                key: "k_refused".to_owned(),
                requests: 1,
                effects: 1,
            }],
            "reported once, not also as an effect unaccounted for"
        );
        assert!(found[0].to_string().contains("refused before it ran"));
    }

    #[test]
    fn a_business_operation_applied_twice_is_one_violation_with_every_key() {
        let operations = vec![
            operation("k1", "refund", OperationState::Succeeded),
            operation("k2", "refund", OperationState::Succeeded),
        ];
        let found = violations(
            &played(Vec::new(), operations),
            vec![
                Applied::new("refund ORD-1", Some("k1")),
                Applied::new("refund ORD-1", Some("k2")),
                Applied::new("refund ORD-2", Some("k1")),
            ],
        );
        assert_eq!(
            found,
            [Violation::AppliedMoreThanOnce {
                operation: "refund ORD-1".to_owned(),
                keys: vec![Some("k1".to_owned()), Some("k2".to_owned())],
            }]
        );
    }
}
