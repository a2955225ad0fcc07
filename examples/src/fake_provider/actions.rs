//! The provider's two other operations: an update of the customer's CRM record, and a
//! notification sent to the customer, each about one order and under an idempotency key.
//!
//! They take faults and count requests as refunds do ([`Operation::Crm`],
//! [`Operation::Notify`]); what they applied is kept in memory, not in the ledger file: the
//! desk's stories read it at the end of the same process.

use serde::Serialize;
use toolgate::ToolError;

use super::{FakeProvider, KeyMode, Operation, answer};

/// A CRM update or a notification the provider applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// The provider's id: `crm_000001` or `ntf_000001`, numbered per operation.
    pub action_id: String,
    /// `crm` or `notify`.
    pub operation: &'static str,
    /// The idempotency key it was requested under.
    pub key: String,
    /// The order whose customer it is about.
    pub order_id: String,
}

impl Operation {
    /// The name of an action operation (`crm`, `notify`), or `None` for the others.
    fn action_name(self) -> Option<&'static str> {
        match self {
            Operation::Crm => Some("crm"),
            Operation::Notify => Some("notify"),
            _ => None,
        }
    }
}

impl FakeProvider {
    /// Applies the action `operation` (`Crm` or `Notify`) about `order_id` under the idempotency
    /// `key`, after `check` (an error from it is the answer, and nothing is applied). With
    /// [`KeyMode::Honours`], a key already used for that operation answers its action and applies
    /// nothing. Any other operation is an internal error.
    pub async fn act(
        &self,
        operation: Operation,
        key: &str,
        order_id: &str,
        check: impl FnOnce() -> Result<(), ToolError>,
    ) -> Result<Action, ToolError> {
        let Some(name) = operation.action_name() else {
            return Err(ToolError::internal(format!(
                "{operation:?} is not an action of the fake provider"
            )));
        };
        let fault = self.arrive(operation, Some(order_id)).await?;
        check()?;
        let action = {
            let mut actions = self
                .actions
                .lock()
                .expect("the actions lock is never poisoned");
            let earlier = actions
                .iter()
                .find(|action| action.operation == name && action.key == key);
            match (self.mode, earlier) {
                (KeyMode::Honours, Some(earlier)) => earlier.clone(),
                _ => {
                    let number = actions.iter().filter(|a| a.operation == name).count() + 1;
                    let prefix = if operation == Operation::Crm {
                        "crm"
                    } else {
                        "ntf"
                    };
                    let action = Action {
                        action_id: format!("{prefix}_{number:06}"),
                        operation: name,
                        key: key.to_owned(),
                        order_id: order_id.to_owned(),
                    };
                    actions.push(action.clone());
                    action
                }
            }
        };
        answer(fault, action).await
    }

    /// Every CRM update and notification applied so far, oldest first.
    pub fn actions(&self) -> Vec<Action> {
        self.actions
            .lock()
            .expect("the actions lock is never poisoned")
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_provider::Fault;

    #[tokio::test]
    async fn an_action_under_a_honoured_key_is_applied_once_and_faults_apply_per_operation() {
        let dir = tempfile::tempdir().unwrap();
        let provider = FakeProvider::open(dir.path().join("l.jsonl"), KeyMode::Honours).unwrap();
        provider.inject(Operation::Notify, Fault::UnavailableBeforeApply, 1);
        let crm = provider
            .act(Operation::Crm, "k1", "ORD-1", || Ok(()))
            .await
            .unwrap();
        assert_eq!(crm.action_id, "crm_000001");
        let again = provider
            .act(Operation::Crm, "k1", "ORD-1", || Ok(()))
            .await
            .unwrap();
        assert_eq!(again, crm);
        let err = provider
            .act(Operation::Notify, "k1", "ORD-1", || Ok(()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), toolgate::ErrorKind::Unavailable);
        let sent = provider
            .act(Operation::Notify, "k1", "ORD-1", || Ok(()))
            .await
            .unwrap();
        assert_eq!(sent.action_id, "ntf_000001");
        assert_eq!(provider.actions().len(), 2);
        assert_eq!(provider.requests(Operation::Crm), 2);
        assert_eq!(provider.requests(Operation::Notify), 2);
        assert!(
            provider
                .act(Operation::Refund, "k", "ORD-1", || Ok(()))
                .await
                .is_err()
        );
    }
}
