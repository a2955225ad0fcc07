//! `Ctx::step`: the steps of a multi-step write, journaled under its operation, and the report
//! of them the model reads.

use std::future::Future;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::Clock;
use crate::error::{ErrorKind, ToolError};
use crate::json_text::JsonText;
use crate::store::StepRequest;
use crate::store::{AttemptError, ClaimToken, OperationStore, StepOutcome, StepStart};

/// Where a step of a call ended, as the model reads it in a result's `steps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepState {
    /// Done; `output` holds its output.
    Succeeded,
    /// Definitely not applied; `error` says why.
    Failed,
    /// It may have acted and nobody knows.
    OutcomeUnknown,
}

/// The error of a step that did not succeed, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepError {
    /// The error's kind.
    pub kind: ErrorKind,
    /// What happened.
    pub what: String,
}

/// One step of a call, in the order the tool reached it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StepReport {
    /// The step's name.
    pub name: String,
    /// Where it ended.
    pub status: StepState,
    /// Whether its outcome was recorded by an earlier attempt and answered from the journal
    /// without running it again.
    pub replayed: bool,
    /// Its output, once succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<JsonText>,
    /// Its error, when it did not succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
}

/// The journal a write's [`Ctx`](crate::Ctx) keeps its steps in: the store, the claim the call
/// runs under, and the report of the steps reached so far.
pub(crate) struct StepJournal {
    store: Arc<dyn OperationStore>,
    owner: ClaimToken,
    clock: Arc<dyn Clock>,
    reports: Mutex<Vec<StepReport>>,
}

impl std::fmt::Debug for StepJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepJournal")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl StepJournal {
    pub(crate) fn new(
        store: Arc<dyn OperationStore>,
        owner: ClaimToken,
        clock: Arc<dyn Clock>,
    ) -> Self {
        StepJournal {
            store,
            owner,
            clock,
            reports: Mutex::new(Vec::new()),
        }
    }

    /// The steps reached so far, in order; a step reached twice (by an in-process retry of the
    /// call) appears once, as it ended last.
    pub(crate) fn reports(&self) -> Vec<StepReport> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StepReport>> {
        self.reports
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn report(&self, report: StepReport) {
        let mut reports = self.lock();
        match reports.iter_mut().find(|r| r.name == report.name) {
            Some(earlier) => *earlier = report,
            None => reports.push(report),
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Runs the step `name`: its recorded output when it succeeded before; `step` when it never
    /// ran or failed; `check` (or an unknown outcome without one) when it began and was never
    /// recorded.
    pub(crate) async fn run<T, F, C, CF>(
        &self,
        tool: &str,
        name: &str,
        step: F,
        check: Option<C>,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = Result<T, ToolError>>,
        C: FnOnce() -> CF,
        CF: Future<Output = Result<Option<T>, ToolError>>,
    {
        let start = self.begin(tool, name).await?;
        match start {
            StepStart::Run => {}
            StepStart::Done(record) => {
                let output = record.output.unwrap_or_default();
                let value = serde_json::from_str::<T>(&output).map_err(|err| {
                    ToolError::internal(format!(
                        "{tool}: the recorded output of step {name} does not read as its type: {err}"
                    ))
                })?;
                self.report(StepReport {
                    name: name.to_owned(),
                    status: StepState::Succeeded,
                    replayed: true,
                    output: JsonText::parse(&output).ok(),
                    error: None,
                });
                return Ok(value);
            }
            StepStart::Unknown(_) => {
                let Some(check) = check else {
                    return Err(self.unknown(
                        name,
                        ToolError::outcome_unknown(format!(
                            "step {name} of {tool} began in an earlier attempt and its outcome \
                             was never recorded; it is not run again"
                        ))
                        .with_next(format!(
                            "do not assume it failed, and do not call {tool} again for this; \
                             the reconciler settles it"
                        )),
                    ));
                };
                match check().await {
                    Ok(Some(value)) => return self.succeeded(tool, name, value, false).await,
                    Ok(None) => {
                        // Not applied: recorded so, then run as a failed step runs again.
                        let not_applied = AttemptError {
                            attempt: self.owner.attempt,
                            kind: ErrorKind::OutcomeUnknown.as_str().to_owned(),
                            what: format!("step {name}: its check found it was not applied"),
                        };
                        self.finish(tool, name, StepOutcome::Failed(&not_applied))
                            .await?;
                        match self.begin(tool, name).await? {
                            StepStart::Run => {}
                            _ => {
                                return Err(self.unknown(
                                    name,
                                    ToolError::outcome_unknown(format!(
                                        "step {name} of {tool} changed while it was checked"
                                    )),
                                ));
                            }
                        }
                    }
                    Err(err) => {
                        return Err(self.unknown(
                            name,
                            ToolError::outcome_unknown(format!(
                                "step {name} of {tool} began in an earlier attempt, and its \
                                 check could not tell whether it was applied: {}",
                                err.what()
                            )),
                        ));
                    }
                }
            }
        }
        match step.await {
            Ok(value) => self.succeeded(tool, name, value, false).await,
            Err(err) if err.kind() == ErrorKind::OutcomeUnknown => {
                // It may have acted: it stays `started`, so it is reconciled, never rerun.
                Err(self.unknown(name, err))
            }
            Err(err) => {
                let error = AttemptError {
                    attempt: self.owner.attempt,
                    kind: err.kind().as_str().to_owned(),
                    what: err.what().to_owned(),
                };
                self.finish(tool, name, StepOutcome::Failed(&error)).await?;
                self.report(StepReport {
                    name: name.to_owned(),
                    status: StepState::Failed,
                    replayed: false,
                    output: None,
                    error: Some(StepError {
                        kind: err.kind(),
                        what: err.what().to_owned(),
                    }),
                });
                Err(err)
            }
        }
    }

    async fn begin(&self, tool: &str, name: &str) -> Result<StepStart, ToolError> {
        self.store
            .begin_step(StepRequest {
                owner: &self.owner,
                name,
                now_ms: self.now_ms(),
            })
            .await
            .map_err(|err| {
                // Nothing of the step ran: the call did not act through it.
                ToolError::unavailable(format!(
                    "{tool}: step {name} could not be journaled before it ran: {err}"
                ))
            })
    }

    async fn finish(
        &self,
        tool: &str,
        name: &str,
        outcome: StepOutcome<'_>,
    ) -> Result<(), ToolError> {
        self.store
            .finish_step(
                StepRequest {
                    owner: &self.owner,
                    name,
                    now_ms: self.now_ms(),
                },
                outcome,
            )
            .await
            .map_err(|err| {
                self.unknown(
                    name,
                    ToolError::outcome_unknown(format!(
                        "{tool}: step {name} ran and its outcome could not be journaled: {err}"
                    )),
                )
            })
    }

    async fn succeeded<T: Serialize>(
        &self,
        tool: &str,
        name: &str,
        value: T,
        replayed: bool,
    ) -> Result<T, ToolError> {
        let output = JsonText::of(&value).map_err(|err| {
            self.unknown(
                name,
                ToolError::outcome_unknown(format!(
                    "{tool}: step {name} ran and its output does not serialize to JSON: {err}"
                )),
            )
        })?;
        self.finish(tool, name, StepOutcome::Succeeded(output.as_str()))
            .await?;
        self.report(StepReport {
            name: name.to_owned(),
            status: StepState::Succeeded,
            replayed,
            output: Some(output),
            error: None,
        });
        Ok(value)
    }

    /// Reports the step `name` unknown and answers `err`.
    fn unknown(&self, name: &str, err: ToolError) -> ToolError {
        self.report(StepReport {
            name: name.to_owned(),
            status: StepState::OutcomeUnknown,
            replayed: false,
            output: None,
            error: Some(StepError {
                kind: ErrorKind::OutcomeUnknown,
                what: err.what().to_owned(),
            }),
        });
        err
    }
}
