//! A turn whose answers reach the caller one by one, as each call is answered: a read is not
//! held back by a slow write of its turn (a store that does not answer, a provider that takes
//! its time).

use tokio::sync::mpsc::UnboundedSender;

use crate::auth::Session;
use crate::call::{CallReport, ToolCall};
use crate::fate::TurnAborted;

use super::Dispatcher;

impl Dispatcher {
    /// Runs one model turn as [`dispatch_turn`](Self::dispatch_turn) does, and sends each
    /// call's report on `answers` as soon as the call is answered, before the turn ends: a read
    /// is answered as fast as it would be alone, whatever its turn's writes wait for.
    ///
    /// Every report the turn answers is sent once, in the order the calls are answered (not
    /// the order the model emitted them); the turn's value is the same as `dispatch_turn`'s,
    /// with every report in the model's order. A turn that aborts the run sends the reports of
    /// the calls answered before the abort; [`TurnAborted::calls`] has the last word on each
    /// call (a late approval it rejected, a call that never started). A receiver dropped
    /// early is ignored: the turn runs to its end.
    ///
    /// ```
    /// use toolgate::prelude::*;
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    /// let turn = vec![
    ///     ToolCall::new("c1", "get_order", serde_json::json!({"order_id": "ORD-1"})),
    ///     ToolCall::new("c2", "get_order", serde_json::json!({"order_id": "ORD-2"})),
    /// ];
    /// let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    /// let reports = dispatcher
    ///     .dispatch_turn_answering(&session, turn, answers)
    ///     .await
    ///     .unwrap();
    /// let mut seen = Vec::new();
    /// while let Some(report) = answered.recv().await {
    ///     seen.push(report.call_id);
    /// }
    /// seen.sort();
    /// assert_eq!(seen, ["c1", "c2"]);
    /// assert_eq!(reports.len(), 2);
    /// # });
    /// ```
    pub async fn dispatch_turn_answering(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
        answers: UnboundedSender<CallReport>,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        self.turn(session, calls, Some(answers)).await
    }
}
