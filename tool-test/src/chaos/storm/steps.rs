//! What a generated story is made of before it is written: [`Draft`], each tool's pool of
//! arguments and the [`Step`]s, which proptest draws and shrinks (a step left out, a call
//! made valid, a fault made milder), and which [`Draft::story`] writes as a [`Story`].

use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use super::super::{Fault, Story, TurnFormat};
use super::Storm;
use super::arguments::{self, Arguments, Breach};

/// How many argument sets each tool's pool holds at most: calls draw from it, so that the
/// same business operation is asked for again, in the same and in later turns.
const POOL: usize = 3;

/// How many calls a turn holds at most: a turn of several is a parallel batch.
const CALLS: usize = 3;

/// A story before it is written.
#[derive(Debug, Clone)]
pub(super) struct Draft {
    /// Each tool's argument sets, by the tool's index.
    pools: Vec<Vec<Value>>,
    steps: Vec<Step>,
}

/// One line of a drawn story.
#[derive(Debug, Clone)]
pub(super) enum Step {
    /// A model turn of these calls, in this format.
    Turn(TurnFormat, Vec<Pick>),
    /// The next `times` requests of the storm's route `route` take `fault`.
    Fault {
        route: usize,
        fault: Fault,
        times: u64,
    },
    /// One pass of the reconciler.
    Reconcile,
    /// The current process restarts.
    Restart,
    /// The lines that follow run in the other process.
    Switch,
    /// The turns that follow belong to a new run.
    NewRun,
    /// Every pending approval is approved.
    Approve,
    /// Every pending approval is rejected.
    Reject,
    /// One pass of the runner of approved operations.
    RunApproved,
    /// The outbox worker delivers what is due.
    Deliver,
}

/// A call of a turn: a tool, an argument set of its pool, and how the call breaks the tool's
/// schema, if it does.
#[derive(Debug, Clone)]
pub(super) struct Pick {
    tool: usize,
    arguments: usize,
    breach: Option<Breach>,
}

/// Drafts of stories for `storm`'s tools.
pub(super) fn drafts(storm: &Storm) -> BoxedStrategy<Draft> {
    let pools: Vec<_> = storm
        .tools
        .iter()
        .map(|tool| vec(arguments::valid(&tool.schema), 1..=POOL))
        .collect();
    let steps = vec(step(storm), 1..=storm.max_lines);
    (pools, steps)
        .prop_map(|(pools, steps)| Draft { pools, steps })
        .boxed()
}

fn step(storm: &Storm) -> BoxedStrategy<Step> {
    let routes = storm.routes.len();
    let pick = (
        0..storm.tools.len(),
        0..POOL,
        prop_oneof![
            6 => Just(None),
            1 => select(Breach::ALL.as_slice()).prop_map(Some),
        ],
    )
        .prop_map(|(tool, arguments, breach)| Pick {
            tool,
            arguments,
            breach,
        });
    let turn = (select(TurnFormat::ALL.as_slice()), vec(pick, 1..=CALLS))
        .prop_map(|(format, calls)| Step::Turn(format, calls));
    let fault = (0..routes, fault(), 1..=2u64).prop_map(|(route, fault, times)| Step::Fault {
        route,
        fault,
        times,
    });
    let mut steps: Vec<(u32, BoxedStrategy<Step>)> = vec![
        (8, turn.boxed()),
        (3, fault.boxed()),
        (2, Just(Step::Reconcile).boxed()),
        (1, Just(Step::Restart).boxed()),
        (1, Just(Step::Switch).boxed()),
        (1, Just(Step::NewRun).boxed()),
    ];
    if storm.approvals.is_some() {
        steps.push((1, Just(Step::Approve).boxed()));
        steps.push((1, Just(Step::Reject).boxed()));
        steps.push((1, Just(Step::RunApproved).boxed()));
    }
    if storm.deliveries {
        steps.push((2, Just(Step::Deliver).boxed()));
    }
    proptest::strategy::Union::new_weighted(steps).boxed()
}

/// The faults, the mildest first (shrinking goes toward it).
fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Unavailable),
        Just(Fault::RateLimited {
            retry_after: Duration::ZERO
        }),
        Just(Fault::Delay(Duration::from_millis(5))),
        Just(Fault::ResetAfterApply),
        Just(Fault::DropAfterApply),
    ]
}

impl Draft {
    /// The story this draft is, for `storm`'s tools and session.
    pub(super) fn story(&self, storm: &Storm) -> Story {
        let (tenant, user, permissions) = &storm.session;
        let mut story = Story::new().session(tenant, user, permissions);
        let (mut calls, mut runs, mut process) = (0, 1, 'a');
        for step in &self.steps {
            story = match step {
                Step::Turn(format, picks) => {
                    let calls: Vec<(String, &str, Arguments)> = picks
                        .iter()
                        .map(|pick| {
                            calls += 1;
                            let tool = &storm.tools[pick.tool];
                            let pool = &self.pools[pick.tool];
                            let valid = &pool[pick.arguments % pool.len()];
                            let arguments = match pick.breach {
                                None => Arguments::Json(valid.clone()),
                                Some(breach) => arguments::broken(valid, &tool.schema, breach),
                            };
                            (calls.to_string(), tool.name, arguments)
                        })
                        .collect();
                    story.turn(*format, &message(*format, &calls))
                }
                Step::Fault {
                    route,
                    fault,
                    times,
                } => story.fault(storm.routes[*route].clone(), *fault, *times),
                Step::Reconcile => story.reconcile(),
                Step::Restart => story.restart(),
                Step::Switch => {
                    process = if process == 'a' { 'b' } else { 'a' };
                    story.process(process.to_string())
                }
                Step::NewRun => {
                    runs += 1;
                    story.run(format!("run-{runs}"))
                }
                Step::Approve | Step::Reject => {
                    let permissions = storm.approvals.clone().unwrap_or_default();
                    if matches!(step, Step::Approve) {
                        story.approve("manager", permissions, "approved in a generated story")
                    } else {
                        story.reject("manager", permissions, "rejected in a generated story")
                    }
                }
                Step::RunApproved => story.run_approved(),
                Step::Deliver => story.deliver(),
            };
        }
        story
    }
}

/// The assistant message of `format` that asks for `calls` (each a number for its id, a tool
/// and its arguments), as the provider sends it.
fn message(format: TurnFormat, calls: &[(String, &str, Arguments)]) -> Value {
    // The arguments as text, for the formats that send text; as a value for the others, where
    // text that is not JSON is sent as an array.
    let text = |arguments: &Arguments| match arguments {
        Arguments::Json(value) => value.to_string(),
        Arguments::Text(text) => text.clone(),
    };
    let value = |arguments: &Arguments| match arguments {
        Arguments::Json(value) => value.clone(),
        Arguments::Text(_) => json!(["not", "JSON"]),
    };
    match format {
        TurnFormat::OpenAiResponses => Value::Array(
            calls
                .iter()
                .map(|(n, name, arguments)| {
                    json!({"type": "function_call", "id": format!("fc_{n}"),
                        "call_id": format!("call_{n}"), "name": name,
                        "arguments": text(arguments), "status": "completed"})
                })
                .collect(),
        ),
        TurnFormat::Anthropic => json!({"role": "assistant", "content": calls
            .iter()
            .map(|(n, name, arguments)| json!({"type": "tool_use", "id": format!("toolu_{n}"),
                "name": name, "input": value(arguments)}))
            .collect::<Vec<_>>()}),
        TurnFormat::Gemini => json!({"role": "model", "parts": calls
            .iter()
            .map(|(_, name, arguments)| json!({"functionCall": {"name": name,
                "args": value(arguments)}}))
            .collect::<Vec<_>>()}),
        TurnFormat::OpenAi => json!({"role": "assistant", "content": null, "tool_calls": calls
            .iter()
            .map(|(n, name, arguments)| json!({"id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": text(arguments)}}))
            .collect::<Vec<_>>()}),
    }
}
