//! Before a tool runs: the tool looked up by name, its arguments readable and valid against its
//! schema, and the session's permission for it.

use serde_json::Value;

use crate::auth::Session;
use crate::call::{Arguments, MalformedCall};
use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::registry::RegisteredTool;
use crate::schema::normalize_numbers;
use crate::validate::invalid_arguments;

use super::Dispatcher;
use super::answers;

impl Dispatcher {
    /// The tool looked up and the arguments readable, or what the model must fix. Text nothing
    /// has checked yet stays unread when the call names a tool: the caller reads it through the
    /// tool or settles it ([`Arguments::settle`]), and either way the answer is the one given
    /// here for checked text.
    pub(super) fn admit(
        &self,
        session: &Session,
        name: &str,
        mut arguments: Result<Arguments, MalformedCall>,
    ) -> Result<(&RegisteredTool, Arguments), ToolError> {
        if name.is_empty() {
            arguments = arguments.and_then(Arguments::settle);
            if let Err(malformed) = &arguments {
                // A call the format could not read at all: say what was wrong with it.
                return Err(answers::unreadable_call(malformed));
            }
        }
        let registered = self.lookup(session, name)?;
        match arguments {
            Ok(arguments) => Ok((registered, arguments)),
            Err(malformed) => Err(answers::malformed_arguments(
                registered.descriptor().name,
                malformed,
            )),
        }
    }

    /// The arguments as a tree, validated against the tool's schema.
    pub(super) fn validated(
        &self,
        registered: &RegisteredTool,
        mut args: Value,
    ) -> Result<Value, ToolError> {
        normalize_numbers(&mut args);
        let violations = registered.validator().violations_if_invalid(&args);
        if violations.is_empty() {
            Ok(args)
        } else {
            Err(invalid_arguments(registered.descriptor().name, &violations))
        }
    }

    /// The tool `name`, if it exists and the session's model was shown it
    /// ([`Session::with_shown_tools`]); else the unknown tool's answer, naming the tools shown.
    fn lookup(&self, session: &Session, name: &str) -> Result<&RegisteredTool, ToolError> {
        let registry = &self.inner.registry;
        match registry.get(name) {
            Some(registered) if session.shows(name) => Ok(registered),
            _ => Err(answers::unknown_tool(
                name,
                registry.names().filter(|known| session.shows(known)),
            )),
        }
    }
}

/// The session holds the tool's permission, if it needs one.
pub(super) fn permitted(session: &Session, descriptor: &ToolDescriptor) -> Result<(), ToolError> {
    match descriptor.permission {
        Some(permission) if !session.auth().has_permission(permission) => Err(
            answers::permission_denied(session, descriptor.name, permission),
        ),
        _ => Ok(()),
    }
}
