//! The futures a tool's methods return, boxed so that a registry can hold tools of any type.

use std::future::Future;
use std::pin::Pin;

use crate::error::ToolError;
use crate::json_text::JsonText;

/// The future a reconcile hook returns: the output if the operation was applied, `None` if it
/// was not, an error if nobody knows yet.
pub type ReconcileFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<JsonText>, ToolError>> + Send + 'a>>;

/// The future a business check returns (`Tool::check`): `Ok(())` lets the call go on, an error
/// (a `refused` one, usually) stops it before anything is stored or sent.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ToolError>> + Send + 'a>>;

/// The future a tool returns from `Tool::invoke`: its output as JSON text, or its error.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<JsonText, ToolError>> + Send + 'a>>;
