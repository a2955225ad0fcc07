//! Provider wire formats: the tool catalog in each format, the calls of a model turn parsed from
//! it, and results rendered back with each format's error flag.
//!
//! Every format lowers the one canonical schema of each tool ([`crate::schema`]); see
//! `lower` for the OpenAI strict and Gemini rules.

use serde_json::Value;

use crate::call::{CallReport, ToolCall};
use crate::registry::Registry;

/// A model turn that is not a message of this format at all (as opposed to one malformed call
/// inside a well-formed turn, which becomes a [`crate::MalformedCall`] and still gets a result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a {format} turn: {reason}")]
pub struct FormatError {
    /// The format expected.
    pub format: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// One provider's wire format.
pub trait WireFormat {
    /// The format's name, as `--format` spells it (`openai`, `anthropic`, …).
    fn name(&self) -> &'static str;

    /// One tool declaration per registered tool, in registration order.
    fn catalog(&self, registry: &Registry) -> Vec<Value>;

    /// The calls of one model turn, in the order the model emitted them. Every call the turn
    /// contains yields a [`ToolCall`], malformed ones included.
    fn parse_calls(&self, turn: &Value) -> Result<Vec<ToolCall>, FormatError>;

    /// The message (or messages) that answer a turn: one result per report, in order.
    fn render_results(&self, reports: &[CallReport]) -> Value;
}
