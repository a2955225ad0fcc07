//! [`RunLimits`]: how far one agent run may go.

/// The limits of one agent run: model turns, tool calls, and attempts of each tool.
///
/// Set for every run with [`DispatcherBuilder::run_limits`](crate::dispatch::DispatcherBuilder::run_limits)
/// (default [`RunLimits::DEFAULT`]) and for one run with
/// [`Session::with_limits`](crate::Session::with_limits). `None` means no limit.
///
/// - **Steps** are model turns: every [`Dispatcher::dispatch_turn`](crate::Dispatcher::dispatch_turn)
///   (and every [`Dispatcher::dispatch`](crate::Dispatcher::dispatch), a turn of one call) is
///   one. The turn after the last
///   allowed one aborts the run with `run_budget_exhausted`.
/// - **Tool calls** are counted per turn (the calls of registered tools): a turn that would pass
///   the limit runs none of its calls, and each answers `call_budget_exhausted` (the turn still
///   counts as a step).
/// - **The retry budget** is the attempts of one tool in the run: every call of the tool counts
///   one (whether it then runs, is refused, or is answered from a stored outcome), and every
///   retry below the model one more. Once spent, a call of the tool answers
///   `retry_budget_exhausted` without running, and a retry in progress stops there.
///
/// The counters live in the dispatcher's operation store when it has one, so a restarted
/// process keeps them (and a run's abort); without a store they live in the
/// [`Session`](crate::Session) value and its clones.
///
/// ```
/// use toolgate::RunLimits;
///
/// let tight = RunLimits::DEFAULT.max_steps(8).max_tool_calls(20).retry_budget(6);
/// assert_eq!(tight.max_steps, Some(8));
/// assert_eq!(RunLimits::UNLIMITED.retry_budget, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Model turns in the run.
    pub max_steps: Option<u32>,
    /// Tool calls in the run, summed over its turns.
    pub max_tool_calls: Option<u32>,
    /// Attempts of each tool in the run (calls and retries below the model).
    pub retry_budget: Option<u32>,
}

impl RunLimits {
    /// 50 turns, 200 tool calls, 50 attempts of each tool.
    pub const DEFAULT: RunLimits = RunLimits {
        max_steps: Some(50),
        max_tool_calls: Some(200),
        retry_budget: Some(50),
    };

    /// No limit at all.
    pub const UNLIMITED: RunLimits = RunLimits {
        max_steps: None,
        max_tool_calls: None,
        retry_budget: None,
    };

    /// With a step limit.
    pub const fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = Some(steps);
        self
    }

    /// With a tool-call limit.
    pub const fn max_tool_calls(mut self, calls: u32) -> Self {
        self.max_tool_calls = Some(calls);
        self
    }

    /// With a retry budget per tool.
    pub const fn retry_budget(mut self, attempts: u32) -> Self {
        self.retry_budget = Some(attempts);
        self
    }
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits::DEFAULT
    }
}
