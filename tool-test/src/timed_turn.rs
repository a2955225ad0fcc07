//! A turn whose reports are timed as they arrive: [`timed_turn`].

use std::time::Duration;

use futures_util::future::join;
use tokio::time::Instant;
use toolgate_core::{Dispatcher, Session, ToolCall, dispatch::CallReport};

/// Runs `calls` as one turn with
/// [`Dispatcher::dispatch_turn_answering`](toolgate_core::Dispatcher::dispatch_turn_answering),
/// and answers the turn's reports (in the model's order) and each report sent, with when it
/// arrived from the turn's start (tokio's clock: exact under paused time), in arrival order.
///
/// # Panics
///
/// When the turn aborts the run, or when the reports sent are not the turn's reports, each
/// once.
pub async fn timed_turn(
    dispatcher: &Dispatcher,
    session: &Session,
    calls: Vec<ToolCall>,
) -> (Vec<CallReport>, Vec<(CallReport, Duration)>) {
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    let turn = dispatcher.dispatch_turn_answering(session, calls, answers);
    let timing = async {
        let mut arrivals = Vec::new();
        while let Some(report) = answered.recv().await {
            arrivals.push((report, started.elapsed()));
        }
        arrivals
    };
    let (reports, arrivals) = join(turn, timing).await;
    let reports = reports.expect("the turn runs");
    assert_eq!(reports.len(), arrivals.len(), "every report was sent once");
    for report in &reports {
        let sent: Vec<&CallReport> = arrivals
            .iter()
            .map(|(sent, _)| sent)
            .filter(|sent| sent.call_id == report.call_id)
            .collect();
        assert_eq!(
            sent,
            [report],
            "the report sent is the one the turn answers"
        );
    }
    (reports, arrivals)
}
