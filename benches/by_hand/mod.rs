//! An OpenAI Chat Completions turn and its answer as serde alone reads and writes them: the
//! hand-written path the benches measure toolgate against.

use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
pub(crate) struct Message {
    pub(crate) tool_calls: Vec<Call>,
}

#[derive(Deserialize)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) function: Function,
}

#[derive(Deserialize)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) arguments: String,
}

/// The result object, the content both paths send back.
#[derive(Serialize)]
pub(crate) struct Envelope<'a, T> {
    pub(crate) status: &'static str,
    pub(crate) replayed: bool,
    pub(crate) data: &'a T,
}

#[derive(Serialize)]
pub(crate) struct ToolMessage<'a> {
    pub(crate) role: &'static str,
    pub(crate) tool_call_id: &'a str,
    pub(crate) content: String,
}
