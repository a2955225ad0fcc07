//! The reading of a call's arguments straight from the JSON text the model sent, which
//! `#[tool]` implements for the tools whose parameter types allow it. Not a public API: the
//! dispatcher reaches it through the hidden [`Tool::text_args`](crate::Tool::text_args), and a
//! tool written by hand has none (its arguments are always validated against its schema).

use std::any::Any;
use std::sync::{Mutex, PoisonError};

use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::tool_futures::ToolFuture;

/// A tool's reading of its arguments from their JSON text, without a tree and without the
/// schema validator, where that is known to decide exactly as the validator would.
///
/// `#[tool]` implements it for tools whose plain parameters are all of the types `String`,
/// `bool`, the integers, `f64`, and `Option` or `Vec` of one of these, with no `#[serde]` or
/// `#[schemars]` attribute: for those, a text serde accepts is a value the schema accepts, and
/// serde refuses the rest (such as `3.0` for an integer, which the schema accepts and the
/// validated path reads as `3`), which then take the validated path. The one difference that
/// remains is the sign of a zero: `-0.0` for an `f64` arrives as `-0.0` here and as `0.0` on
/// the validated path.
pub trait TextArgs: Send + Sync {
    /// Runs the tool on arguments as the JSON text the model sent; `None` when the text does
    /// not deserialize into the tool's types, and the dispatcher then parses the text,
    /// validates the tree against the schema and calls [`Tool::invoke`](crate::Tool::invoke).
    ///
    /// `text` is one JSON object
    /// ([`Arguments::from_text`](crate::dispatch::Arguments::from_text) checked it). The
    /// default runs [`TextArgs::read_args`] and then [`TextArgs::invoke_args`].
    fn invoke_text<'a>(&'a self, ctx: &'a Ctx, text: &'a str) -> Option<ToolFuture<'a>> {
        let args = self.read_args(text)?;
        Some(self.invoke_args(ctx, args))
    }

    /// Reads arguments sent as JSON text that nothing has checked yet, for
    /// [`TextArgs::invoke_args`]: `Some` only when `text` is exactly one JSON object, with each
    /// key once, that [`Arguments::from_text`](crate::dispatch::Arguments::from_text) would
    /// accept, and that [`TextArgs::invoke_text`] would run. `None` for any other text, which
    /// the dispatcher then checks and reads as it would without this method, with the same
    /// errors.
    ///
    /// This is how [`Dispatcher::answer_turn`](crate::Dispatcher::answer_turn) reads a call's
    /// arguments in one pass: the tool's own reading is the check. `#[tool]` implements it for
    /// the tools that read plain parameters of the types above, at most 64 of them (a tool with
    /// more reads them with serde's derive, which takes an array too): the reader they share
    /// takes only an object, refuses a key given twice or unknown, and those types hold no
    /// object of their own. The default is `None`, which is always correct.
    fn read_args(&self, text: &str) -> Option<ReadArgs> {
        let _ = text;
        None
    }

    /// Runs the tool on arguments its [`TextArgs::read_args`] read. The default, for a reading
    /// that reads nothing ahead, answers an `internal` error.
    fn invoke_args<'a>(&'a self, ctx: &'a Ctx, args: ReadArgs) -> ToolFuture<'a> {
        let _ = (ctx, args);
        Box::pin(std::future::ready(Err(ToolError::internal(
            "a tool was handed arguments it did not read ahead",
        ))))
    }
}

/// Arguments a tool read from text with [`TextArgs::read_args`], held for its
/// [`TextArgs::invoke_args`]: whatever type the tool reads them into. `Sync` whatever that
/// type is (nothing reaches them through a shared reference), so that a dispatcher's future
/// may hold them.
pub struct ReadArgs(Mutex<Box<dyn Any + Send>>);

impl ReadArgs {
    /// `args`, held.
    pub fn new<T: Any + Send>(args: T) -> Self {
        ReadArgs(Mutex::new(Box::new(args)))
    }

    /// The arguments, if they are a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        let args = self.0.into_inner().unwrap_or_else(PoisonError::into_inner);
        args.downcast().ok().map(|args| *args)
    }
}

impl std::fmt::Debug for ReadArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadArgs(..)")
    }
}
