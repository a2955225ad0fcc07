//! What a result says beyond its data, told to the narrator: the delivery of an outbox refund,
//! and the steps of a multi-step tool.

use toolgate::{CallResult, tool::StepState};

use super::Desk;
use crate::refund_desk::narrate::Voice;
use crate::refund_desk::script::shortened;

impl Desk {
    /// Narrates `result`'s delivery note and steps, when it has them.
    pub(super) fn tell_progress(&self, result: &CallResult) {
        if let Some(delivery) = &result.delivery {
            self.say(
                Voice::Aside,
                &format!(
                    "      delivery {}: {} after {} attempt(s): {}",
                    shortened(&delivery.operation, 12),
                    delivery.state.as_str(),
                    delivery.attempts,
                    delivery.what
                ),
            );
        }
        for step in result.steps.iter().flat_map(|steps| steps.iter()) {
            let (voice, status) = match step.status {
                StepState::Succeeded => (Voice::Good, "succeeded"),
                StepState::Failed => (Voice::Bad, "failed"),
                _ => (Voice::Bad, "outcome unknown"),
            };
            let detail = match (&step.output, &step.error) {
                (_, Some(error)) => format!(" ({}) {}", error.kind, error.what),
                (Some(output), None) => format!(" {}", shortened(output.as_str(), 120)),
                (None, None) => String::new(),
            };
            let replayed = if step.replayed {
                " (from the journal, not run again)"
            } else {
                ""
            };
            self.say(
                voice,
                &format!("      step {}: {status}{replayed}{detail}", step.name),
            );
        }
    }
}
