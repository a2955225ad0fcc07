//! What the desk tells a person: on stdout for the narrated story, on stderr beside a script's
//! answers. In colour when it goes to a terminal.

use std::io::{IsTerminal, Write};

/// What a line of narration is about; each has its colour.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Voice {
    /// A heading: the run, the ledger.
    Title,
    /// What the model asked for.
    Model,
    /// Requests to the payment provider and its answers.
    Provider,
    /// A fault armed on the provider, a restart: the world misbehaving.
    Trouble,
    /// A call that succeeded, a reconciliation that settled something.
    Good,
    /// A call answered with an error the model can act on.
    Bad,
    /// An explanation of what toolgate did and why.
    Aside,
}

impl Voice {
    fn colour(self) -> &'static str {
        match self {
            Voice::Title => "\x1b[1m",
            Voice::Model => "\x1b[36m",
            Voice::Provider => "\x1b[34m",
            Voice::Trouble => "\x1b[33m",
            Voice::Good => "\x1b[32m",
            Voice::Bad => "\x1b[31m",
            Voice::Aside => "\x1b[2m",
        }
    }
}

/// Where narration goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Narrator {
    to_stdout: bool,
    colour: bool,
}

impl Narrator {
    /// Narration on stdout (the story) or stderr (beside a script's answers).
    pub(crate) fn new(to_stdout: bool) -> Self {
        let colour = std::env::var_os("NO_COLOR").is_none()
            && if to_stdout {
                std::io::stdout().is_terminal()
            } else {
                std::io::stderr().is_terminal()
            };
        Narrator { to_stdout, colour }
    }

    /// Says `text` in `voice`, one line (or more, when `text` has newlines).
    pub(crate) fn say(&self, voice: Voice, text: &str) {
        let line = if self.colour {
            format!("{}{text}\x1b[0m\n", voice.colour())
        } else {
            format!("{text}\n")
        };
        // Narration is best effort: a closed pipe must not stop the desk.
        let _ = if self.to_stdout {
            std::io::stdout().lock().write_all(line.as_bytes())
        } else {
            std::io::stderr().lock().write_all(line.as_bytes())
        };
    }
}
