//! [`play`]: a [`Story`] played on a [`Stage`], line by line.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use toolgate_core::dispatch::TurnError;
use toolgate_core::idempotency::operation_key;
use toolgate_core::identity::IdentityError;
use toolgate_core::store::{
    ApprovalQuery, ApprovalStatus, DecideRequest, OperationQuery, OperationStore, StoreError,
    Verdict,
};
use toolgate_core::{AuthContext, Dispatcher, RunLimits, Session, ToolCall};

use super::played::{Answer, Answered, AskedCall, PlayedTurn, TurnOutcome};
use super::{Played, Stage, Story, StoryLine, TurnFormat};
use crate::operator::try_operator;

/// How many approved operations a `run_approved` line runs at most.
const RUN_APPROVED_LIMIT: u32 = 100;

/// Why a story could not be played to its end: the stage failed it, or a line cannot be
/// played. A violation of toolgate's promises is no error here: [`Played::check`] finds it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlayError {
    /// The store could not be opened for the story's first process.
    #[error("the stage's store could not be opened: {0}")]
    Open(#[source] StoreError),
    /// The stage built a dispatcher without a store: give the store `Stage::new` hands over to
    /// the dispatcher's builder (`.store(store)`).
    #[error("the stage's dispatcher has no store: build it with `.store(store)`")]
    NoStore,
    /// A line's work on the store failed (opening it again, a reconcile pass, a decision, the
    /// runner of approved operations).
    #[error("line {line}: the store failed: {source}")]
    Store {
        /// The line's number.
        line: usize,
        /// What the store answered.
        #[source]
        source: StoreError,
    },
    /// A turn is not a message of its format.
    #[error("line {line}: {source}")]
    Unreadable {
        /// The line's number.
        line: usize,
        /// What the format or the dispatcher answered.
        #[source]
        source: TurnError,
    },
    /// An approver is not an identifier, which no authenticator proves.
    #[error("line {line}: the approver cannot sign in: {source}")]
    Approver {
        /// The line's number.
        line: usize,
        /// Why.
        #[source]
        source: IdentityError,
    },
    /// A `deliver` line, on a stage without an outbox worker: give it one with
    /// `Stage::with_worker`.
    #[error("line {line}: a `deliver` line needs the stage's outbox worker (`Stage::with_worker`)")]
    NoWorker {
        /// The line's number.
        line: usize,
    },
    /// An `act` line names an act the stage does not have: give it one with
    /// `Stage::with_act`.
    #[error("line {line}: the stage has no act `{name}` (`Stage::with_act`)")]
    NoAct {
        /// The line's number.
        line: usize,
        /// The act's name.
        name: String,
    },
    /// The final reconcile pass, or the listing of the operations after it, failed.
    #[error("the final reconcile pass failed: {0}")]
    Final(#[source] StoreError),
}

/// Plays `story` on `stage`, line by line, and then one reconcile pass, in the process the
/// story ended in, with the faults not played yet forgotten (the storm has passed: the
/// provider answers the reconciler); answers what each line answered, the operations of the store after that
/// pass and the requests the stage's plan saw.
///
/// The story starts in process `a`, as tenant `acme`, user `agent` with no permission, in run
/// `run-1`, until its `session` and `run` lines say otherwise.
///
/// # Errors
///
/// [`PlayError`] when the stage fails the story (its store cannot be opened or fails) or a
/// line cannot be played (a turn its format cannot read, an approver who is no identifier).
pub async fn play(stage: &Stage, story: &Story) -> Result<Played, PlayError> {
    let store = stage.open().await.map_err(PlayError::Open)?;
    let first = Process::new(stage, store);
    if first.dispatcher.store().is_none() {
        return Err(PlayError::NoStore);
    }
    let mut player = Player {
        stage,
        processes: BTreeMap::from([("a".to_owned(), first)]),
        current: "a".to_owned(),
        session: Session::new(AuthContext::new("acme", "agent"), "run-1"),
        answers: Vec::new(),
    };
    for (index, line) in story.lines().iter().enumerate() {
        player.play(index + 1, line).await?;
    }
    player.finish().await
}

/// `session` under `limits`, when there are any.
fn with_limits(session: Session, limits: Option<RunLimits>) -> Session {
    match limits {
        Some(limits) => session.with_limits(limits),
        None => session,
    }
}

/// One process of a story: its dispatcher, and the store it opened (which its outbox worker,
/// if any, delivers from).
struct Process {
    dispatcher: Dispatcher,
    store: Arc<dyn OperationStore>,
}

impl Process {
    fn new(stage: &Stage, store: Arc<dyn OperationStore>) -> Process {
        Process {
            dispatcher: stage.build(Arc::clone(&store)),
            store,
        }
    }
}

/// A story between two of its lines.
struct Player<'a> {
    stage: &'a Stage,
    /// Each process's dispatcher, by name.
    processes: BTreeMap<String, Process>,
    current: String,
    session: Session,
    answers: Vec<Answered>,
}

impl Player<'_> {
    async fn play(&mut self, line: usize, text: &StoryLine) -> Result<(), PlayError> {
        let answer = match text {
            StoryLine::Session {
                tenant,
                user,
                permissions,
            } => {
                let auth = AuthContext::new(tenant.as_str(), user.as_str())
                    .with_permissions(permissions.iter().map(String::as_str));
                self.session = with_limits(
                    Session::new(auth, self.session.run_id()),
                    self.session.limits(),
                );
                return Ok(());
            }
            StoryLine::Run { id, limits } => {
                let session = Session::new(self.session.auth().clone(), id.as_str());
                self.session = with_limits(session, *limits);
                return Ok(());
            }
            StoryLine::Fault {
                route,
                fault,
                times,
            } => {
                self.stage.plan().next(route.clone(), *times, *fault);
                return Ok(());
            }
            StoryLine::Restart => {
                // The old dispatcher goes first, and the store it held with it (a pool closes
                // its connections as it is dropped), as a process that ends.
                self.processes.remove(&self.current);
                let store = self.open(line).await?;
                self.processes
                    .insert(self.current.clone(), Process::new(self.stage, store));
                return Ok(());
            }
            StoryLine::Process(name) => {
                if !self.processes.contains_key(name) {
                    let store = self.open(line).await?;
                    self.processes
                        .insert(name.clone(), Process::new(self.stage, store));
                }
                self.current.clone_from(name);
                return Ok(());
            }
            StoryLine::Turn { format, message } => {
                Answer::Turn(self.turn(line, *format, message).await?)
            }
            StoryLine::Reconcile => {
                let report = self.stage.reconciler(self.dispatcher()).run_once().await;
                Answer::Reconciled(report.map_err(|source| PlayError::Store { line, source })?)
            }
            StoryLine::Decide {
                verdict,
                approver,
                permissions,
                reason,
            } => {
                self.decide(line, *verdict, approver, permissions, reason)
                    .await?
            }
            StoryLine::RunApproved => {
                let pass = self.dispatcher().run_approved(RUN_APPROVED_LIMIT).await;
                Answer::RanApproved(pass.map_err(|source| PlayError::Store { line, source })?)
            }
            StoryLine::Deliver => {
                let store = Arc::clone(&self.processes[&self.current].store);
                let worker = self
                    .stage
                    .worker(store)
                    .ok_or(PlayError::NoWorker { line })?;
                let delivered = worker.drain().await;
                Answer::Delivered(delivered.map_err(|source| PlayError::Store { line, source })?)
            }
            StoryLine::Act { name, args } => {
                let act = self.stage.act(name).ok_or_else(|| PlayError::NoAct {
                    line,
                    name: name.clone(),
                })?;
                Answer::Acted(act(args.clone()).await)
            }
        };
        self.answers.push(Answered {
            line,
            process: self.current.clone(),
            answer,
        });
        Ok(())
    }

    /// The current process's dispatcher.
    fn dispatcher(&self) -> &Dispatcher {
        // Every process named by `current` was built before it became current.
        &self.processes[&self.current].dispatcher
    }

    /// The store, opened again for a restart or a new process.
    async fn open(
        &self,
        line: usize,
    ) -> Result<Arc<dyn toolgate_core::store::OperationStore>, PlayError> {
        self.stage
            .open()
            .await
            .map_err(|source| PlayError::Store { line, source })
    }

    async fn turn(
        &self,
        line: usize,
        format: TurnFormat,
        message: &str,
    ) -> Result<PlayedTurn, PlayError> {
        let wire = format.wire();
        let unreadable = |source| PlayError::Unreadable { line, source };
        let calls = wire
            .parse_calls_text(message)
            .map_err(|err| unreadable(TurnError::from(err)))?;
        let dispatcher = self.dispatcher();
        let asked = calls
            .iter()
            .map(|call| asked(dispatcher, &self.session, call))
            .collect();
        let outcome = match dispatcher.answer_turn(wire, &self.session, message).await {
            Ok(answer) => TurnOutcome::Answered {
                message: answer.message.map(|message| message.as_str().to_owned()),
                reports: answer.reports,
            },
            Err(TurnError::Aborted(aborted)) => TurnOutcome::Aborted(aborted),
            Err(other) => return Err(unreadable(other)),
        };
        Ok(PlayedTurn {
            format,
            tenant: self.session.auth().tenant().to_owned(),
            run: self.session.run_id().to_owned(),
            asked,
            outcome,
        })
    }

    async fn decide(
        &self,
        line: usize,
        verdict: Verdict,
        approver: &str,
        permissions: &[String],
        reason: &str,
    ) -> Result<Answer, PlayError> {
        let tenant = self.session.auth().tenant();
        let permissions: Vec<&str> = permissions.iter().map(String::as_str).collect();
        let approver = try_operator(tenant, approver, &permissions)
            .map_err(|source| PlayError::Approver { line, source })?;
        let store = self.dispatcher().store().ok_or(PlayError::NoStore)?;
        let failed = |source| PlayError::Store { line, source };
        let query = ApprovalQuery {
            tenant: Some(tenant),
            status: Some(ApprovalStatus::Pending),
            limit: 0,
        };
        let mut decided = Vec::new();
        for approval in store.list_approvals(query).await.map_err(failed)? {
            let request = DecideRequest {
                id: &approval.id,
                approver: &approver,
                verdict,
                reason,
                now_ms: self.stage.now_ms(),
            };
            let decision = toolgate_core::approval::decide(store, request).await;
            decided.push(decision.map_err(failed)?);
        }
        Ok(Answer::Decided(decided))
    }

    /// The reconcile pass after the last line, and where the store and the provider stand.
    async fn finish(self) -> Result<Played, PlayError> {
        // The storm has passed: the provider answers the final pass's questions.
        self.stage.plan().clear();
        let dispatcher = self.dispatcher();
        let final_reconcile = self
            .stage
            .reconciler(dispatcher)
            .run_once()
            .await
            .map_err(PlayError::Final)?;
        let store = dispatcher.store().ok_or(PlayError::NoStore)?;
        let operations = store
            .list_operations(OperationQuery::default())
            .await
            .map_err(PlayError::Final)?;
        let reconciled_tools: BTreeSet<String> = dispatcher
            .registry()
            .iter()
            .filter(|tool| tool.descriptor().reconcile.is_some())
            .map(|tool| tool.descriptor().name.to_owned())
            .collect();
        Ok(Played {
            answers: self.answers,
            final_reconcile,
            operations,
            requests: self.stage.plan().requests(),
            reconciled_tools,
        })
    }
}

/// `call` as the turn asked for it, with the key the dispatcher derives for it when it has one.
fn asked(dispatcher: &Dispatcher, session: &Session, call: &ToolCall) -> AskedCall {
    let key = dispatcher
        .registry()
        .get(&call.name)
        .map(|tool| tool.descriptor())
        .filter(|descriptor| !descriptor.side_effect.is_read())
        .zip(call.arguments.as_ref().ok())
        .map(|(descriptor, arguments)| (descriptor, arguments.to_value()))
        .filter(|(_, arguments)| arguments.is_object())
        .map(|(descriptor, arguments)| {
            operation_key(
                descriptor,
                session.auth().tenant(),
                session.run_id(),
                &arguments,
            )
        });
    AskedCall {
        id: call.id.clone(),
        tool: call.name.clone(),
        key,
    }
}
