//! The lowerings of a registered tool's schema, made once when the tool is registered and read
//! by every catalog, and the tools that fall back to their canonical schema.

use std::fmt;

use serde_json::Value;

use super::anthropic_limits::AnthropicBudget;
use super::error::{LoweringError, LoweringTarget};
use super::{anthropic_strict, gemini, openai_strict};
use crate::provider::gemini::declares_parameters;

/// A tool whose schema does not lower to a dialect, so that every catalog in that dialect
/// declares it with its canonical schema instead: `"strict": false` in OpenAI strict mode and
/// Anthropic strict tool use, `parametersJsonSchema` for Gemini. The validator enforces the
/// canonical schema either way.
///
/// [`Registry::lowering_fallbacks`](crate::Registry::lowering_fallbacks) lists them, found
/// when each tool was registered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoweringFallback {
    /// The tool's wire name.
    pub tool: &'static str,
    /// Why its schema does not lower, and what to change; `error.target` is the dialect.
    pub error: LoweringError,
}

impl LoweringFallback {
    /// How the tool is declared in the dialect instead.
    pub fn declared(&self) -> &'static str {
        match self.error.target {
            LoweringTarget::OpenAiStrict | LoweringTarget::AnthropicStrict => "without strict mode",
            LoweringTarget::Gemini => "with parametersJsonSchema",
        }
    }
}

impl fmt::Display for LoweringFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is declared {}: {}",
            self.tool,
            self.declared(),
            self.error
        )
    }
}

/// A tool's canonical schema lowered to each dialect.
#[derive(Debug, Clone)]
pub(crate) struct Lowerings {
    strict: Result<Value, LoweringError>,
    anthropic: Result<Value, LoweringError>,
    /// `None` when the Gemini declaration has no parameters.
    gemini: Option<Result<Value, LoweringError>>,
}

impl Lowerings {
    /// Lowers `schema` to every dialect.
    pub(crate) fn of(schema: &Value) -> Self {
        Lowerings {
            strict: openai_strict(schema),
            anthropic: anthropic_strict(schema),
            gemini: declares_parameters(schema).then(|| gemini(schema)),
        }
    }

    /// Counts the tool's Anthropic strict schema against what the tools registered before it
    /// use of the limits of one request ([`AnthropicBudget`]): a tool that would pass one is
    /// declared without strict tool use, and the limit is why.
    pub(crate) fn spend(&mut self, budget: &mut AnthropicBudget) {
        if let Ok(lowered) = &self.anthropic
            && let Err(err) = budget.spend(lowered)
        {
            self.anthropic = Err(err);
        }
    }

    /// The OpenAI strict-mode schema, or why there is none.
    pub(crate) fn strict(&self) -> Result<&Value, &LoweringError> {
        self.strict.as_ref()
    }

    /// The Anthropic strict tool use schema, or why there is none.
    pub(crate) fn anthropic_strict(&self) -> Result<&Value, &LoweringError> {
        self.anthropic.as_ref()
    }

    /// Gemini's `parameters`, or why there are none; `None` for a declaration without them.
    pub(crate) fn gemini(&self) -> Option<Result<&Value, &LoweringError>> {
        self.gemini.as_ref().map(Result::as_ref)
    }

    /// The fallbacks of the tool `tool`, one per dialect its schema does not lower to.
    pub(crate) fn fallbacks(&self, tool: &'static str) -> impl Iterator<Item = LoweringFallback> {
        let strict = self.strict.as_ref().err();
        let anthropic = self.anthropic.as_ref().err();
        let gemini = self
            .gemini
            .as_ref()
            .and_then(|lowered| lowered.as_ref().err());
        strict
            .into_iter()
            .chain(anthropic)
            .chain(gemini)
            .map(move |error| LoweringFallback {
                tool,
                error: error.clone(),
            })
    }
}
