//! A turn's calls before any of them runs: each looked up and its permission checked (a missing
//! one aborts the run before anything starts), a write's arguments validated and its key
//! derived; then the order they run in. Writes naming the same `resource` value, or sharing an
//! idempotency key, run one after the other in the order the model emitted them, and a write
//! identical to an earlier one of the turn (same key, same arguments) runs once; every other
//! call runs concurrently.

use std::collections::HashMap;

use serde_json::Value;

use crate::auth::Session;
use crate::call::{Arguments, ToolCall};
use crate::error::{ErrorClass, ToolError};
use crate::idempotency::{canonical_json, operation_key, request_hash};
use crate::schema::normalize_numbers;
use crate::tool::ReadArgs;
use crate::validate::invalid_arguments;

use crate::registry::RegisteredTool;

use super::{Dispatcher, admit, answers, repeat, unwind};

/// One call of a turn, ready to run.
pub(super) struct Planned {
    /// Its place in the turn.
    pub(super) place: usize,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) step: Step,
    /// Whether the run's retry budget lets it run.
    pub(super) granted: bool,
    /// The place of an earlier write of the turn with the same key and arguments, whose outcome
    /// this one answers, as a replay, without running.
    pub(super) copy_of: Option<usize>,
}

/// What a planned call does.
pub(super) enum Step {
    /// A read; its arguments are validated when it runs (from text, when the tool can).
    Read {
        tool: &'static str,
        arguments: Arguments,
        /// The arguments as the tool read them from text nothing had checked
        /// ([`Tool::read_args`](crate::Tool::read_args)): the text was one object, and the
        /// read's first attempt runs on these.
        read: Option<ReadArgs>,
    },
    /// A write with valid arguments; boxed, so that a read's call is not the size of a write's.
    Write(Box<PreparedWrite>),
    /// Answered without running: an unknown tool, unreadable or invalid arguments, a missing
    /// permission (which aborts the run).
    Refused {
        /// The tool, when it is registered.
        tool: Option<&'static str>,
        err: ToolError,
        /// The call's fingerprint, when its arguments could be read (for repeat detection).
        fingerprint: Option<String>,
    },
}

/// A write whose arguments are valid, with its operation's key.
pub(super) struct PreparedWrite {
    pub(super) tool: &'static str,
    pub(super) args: Value,
    pub(super) canonical: String,
    pub(super) hash: String,
    pub(super) key: String,
    /// The canonical JSON of the tool's `resource` argument, when it declares one.
    pub(super) resource: Option<String>,
}

impl Step {
    /// The registered tool the call names, if any.
    pub(super) fn tool(&self) -> Option<&'static str> {
        match self {
            Step::Read { tool, .. } => Some(tool),
            Step::Write(write) => Some(write.tool),
            Step::Refused { tool, .. } => *tool,
        }
    }

    /// The error that aborts the run, if the call is refused with one.
    pub(super) fn abort(&self) -> Option<&ToolError> {
        match self {
            Step::Refused { err, .. } if err.class() == ErrorClass::Abort => Some(err),
            _ => None,
        }
    }
}

impl Dispatcher {
    /// `call`, looked up, permitted and, for a write, validated.
    pub(super) fn prepare(&self, session: &Session, place: usize, call: ToolCall) -> Planned {
        let ToolCall {
            id,
            name,
            arguments,
        } = call;
        let step = match self.admit(session, &name, arguments) {
            Err(err) => Step::Refused {
                tool: None,
                err,
                fingerprint: None,
            },
            Ok((registered, arguments)) => {
                let descriptor = registered.descriptor();
                let permitted = admit::permitted(session, descriptor);
                // A read the session may make reads text nothing has checked in one pass.
                let read = descriptor.side_effect.is_read();
                match self.checked(registered, arguments, read && permitted.is_ok()) {
                    Err((tool, err)) => Step::Refused {
                        tool,
                        err,
                        fingerprint: None,
                    },
                    Ok((arguments, taken)) if read => {
                        self.prepare_read(session, &id, registered, arguments, taken, permitted)
                    }
                    Ok((arguments, _)) => {
                        self.prepare_write(session, registered, arguments, permitted)
                    }
                }
            }
        };
        Planned::new(place, id, name, step)
    }

    /// The arguments checked: text nothing has checked read by the tool when `one_pass` (the
    /// tool's reading is the check, and the read's first attempt runs on what it read), checked
    /// as [`Arguments::from_text`] checks it otherwise, or when the tool does not take it. Text
    /// that is malformed gets the answer [`Dispatcher::admit`] gives checked text that is; the
    /// error comes with the tool to count the call under, if any (see [`Step::Refused`]).
    fn checked(
        &self,
        registered: &RegisteredTool,
        arguments: Arguments,
        one_pass: bool,
    ) -> Result<(Arguments, Option<ReadArgs>), Refusal> {
        let tool = registered.descriptor().name;
        if let (true, Some(text)) = (one_pass, arguments.as_unread()) {
            match unwind::reading(tool, || registered.tool().read_args(text)) {
                Ok(Some(read)) => return Ok((arguments.read_as_object(), Some(read))),
                Ok(None) => {}
                Err(panicked) => return Err((Some(tool), panicked)),
            }
        }
        match arguments.settle() {
            Ok(arguments) => Ok((arguments, None)),
            Err(malformed) => Err((None, answers::malformed_arguments(tool, malformed))),
        }
    }
}

/// Why a call's arguments were refused as they were checked: the tool to count the call under,
/// if any (see [`Step::Refused`]), and the error.
type Refusal = (Option<&'static str>, ToolError);

impl Planned {
    fn new(place: usize, id: String, name: String, step: Step) -> Self {
        Planned {
            place,
            id,
            name,
            step,
            granted: true,
            copy_of: None,
        }
    }
}

impl Dispatcher {
    /// A read the session may make, with its arguments as checked (and read, when the tool read
    /// them); one it may not make is refused, after its arguments are validated: the model hears
    /// of invalid arguments first, and a valid call the session may not make aborts.
    fn prepare_read(
        &self,
        session: &Session,
        call_id: &str,
        registered: &RegisteredTool,
        arguments: Arguments,
        read: Option<ReadArgs>,
        permitted: Result<(), ToolError>,
    ) -> Step {
        let tool = registered.descriptor().name;
        let Err(denied) = permitted else {
            return Step::Read {
                tool,
                arguments,
                read,
            };
        };
        match self.valid_read(session, call_id, registered, &arguments) {
            Err(invalid) => Step::Refused {
                tool: Some(tool),
                err: invalid,
                fingerprint: Some(repeat::fingerprint(
                    &self.inner.hash_secret,
                    tool,
                    &arguments,
                )),
            },
            Ok(()) => Step::Refused {
                tool: Some(tool),
                err: denied,
                fingerprint: None,
            },
        }
    }

    /// A write's arguments validated, then the session's permission (`permitted`) checked, then
    /// its key.
    fn prepare_write(
        &self,
        session: &Session,
        registered: &RegisteredTool,
        arguments: Arguments,
        permitted: Result<(), ToolError>,
    ) -> Step {
        let descriptor = registered.descriptor();
        let tool = descriptor.name;
        let mut args = arguments.into_value();
        normalize_numbers(&mut args);
        let canonical = canonical_json(&args);
        let hash = request_hash(&self.inner.hash_secret, tool, &canonical);
        let violations = registered.validator().violations_if_invalid(&args);
        if !violations.is_empty() {
            return Step::Refused {
                tool: Some(tool),
                err: invalid_arguments(tool, &violations),
                fingerprint: Some(hash),
            };
        }
        if let Err(denied) = permitted {
            return Step::Refused {
                tool: Some(tool),
                err: denied,
                fingerprint: None,
            };
        }
        let tenant = session.auth().tenant();
        let key = operation_key(descriptor, tenant, session.run_id(), &args);
        let resource = descriptor
            .resource
            .and_then(|field| args.get(field))
            .map(canonical_json);
        Step::Write(Box::new(PreparedWrite {
            tool,
            args,
            canonical,
            hash,
            key,
            resource,
        }))
    }

    /// Whether a read's arguments are valid, read as the read path would read them: the text
    /// into the tool's parameters when it can (the call built is dropped, never run), else the
    /// tree against the schema. Only for a read the session may not make, to tell the model
    /// of invalid arguments first.
    fn valid_read(
        &self,
        session: &Session,
        call_id: &str,
        registered: &RegisteredTool,
        arguments: &Arguments,
    ) -> Result<(), ToolError> {
        if let Some(text) = arguments.as_text() {
            let ctx = self.ctx(session, call_id, registered);
            let name = registered.descriptor().name;
            if unwind::reading(name, || registered.tool().invoke_text(&ctx, text).is_some())? {
                return Ok(());
            }
        }
        self.validated(registered, arguments.to_value()).map(drop)
    }
}

/// The calls of each tool in a turn, each tool once, in the order of its first call
/// ([`ToolCounts::as_slice`]).
pub(super) enum ToolCounts {
    /// No tool, or one: the common turn, counted without an allocation.
    Few(Option<(&'static str, u32)>),
    /// Two tools or more.
    Many(Vec<(&'static str, u32)>),
}

impl ToolCounts {
    pub(super) fn as_slice(&self) -> &[(&'static str, u32)] {
        match self {
            ToolCounts::Few(one) => one.as_slice(),
            ToolCounts::Many(counts) => counts,
        }
    }
}

/// The calls of each tool in the turn.
pub(super) fn tool_counts(planned: &[Planned]) -> ToolCounts {
    let mut counts = ToolCounts::Few(None);
    for tool in planned.iter().filter_map(|call| call.step.tool()) {
        match &mut counts {
            ToolCounts::Few(None) => counts = ToolCounts::Few(Some((tool, 1))),
            ToolCounts::Few(Some((name, count))) if *name == tool => *count += 1,
            ToolCounts::Few(Some(first)) => {
                let first = *first;
                counts = ToolCounts::Many(vec![first, (tool, 1)]);
            }
            ToolCounts::Many(counts) => match counts.iter_mut().find(|(name, _)| *name == tool) {
                Some((_, count)) => *count += 1,
                None => counts.push((tool, 1)),
            },
        }
    }
    counts
}

/// Marks the calls of each tool beyond its grant (the last ones of the turn) as not granted.
pub(super) fn apply_grants(
    planned: &mut [Planned],
    counts: &[(&'static str, u32)],
    granted: &[u32],
) {
    let all_granted = counts
        .iter()
        .enumerate()
        .all(|(i, (_, calls))| granted.get(i).is_some_and(|granted| granted >= calls));
    if all_granted {
        // The common turn: every call is within its budget, nothing to mark.
        return;
    }
    let mut left: Vec<u32> = (0..counts.len())
        .map(|i| granted.get(i).copied().unwrap_or(0))
        .collect();
    for call in planned.iter_mut() {
        let Some(tool) = call.step.tool() else {
            continue;
        };
        let Some(i) = counts.iter().position(|(name, _)| *name == tool) else {
            continue;
        };
        if left[i] > 0 {
            left[i] -= 1;
        } else {
            call.granted = false;
        }
    }
}

/// The units the turn runs concurrently: each a list of indices into `planned`, run one after
/// the other. Writes on one resource value or key share a unit (in the order emitted, merged
/// when a write joins two); every other call is a unit of its own. Marks identical writes.
pub(super) fn units(planned: &mut [Planned]) -> Vec<Vec<usize>> {
    let mut units: Vec<Vec<usize>> = Vec::with_capacity(planned.len());
    let mut unit_of_label: HashMap<String, usize> = HashMap::new();
    let mut first_of: HashMap<(String, String), usize> = HashMap::new();
    for index in 0..planned.len() {
        let Step::Write(write) = &planned[index].step else {
            units.push(vec![index]);
            continue;
        };
        let labels: Vec<String> = write
            .resource
            .iter()
            .map(|value| format!("resource:{value}"))
            .chain(std::iter::once(format!("key:{}", write.key)))
            .collect();
        let identical = (write.key.clone(), write.hash.clone());
        let mut joined: Option<usize> = None;
        for label in &labels {
            let Some(&found) = unit_of_label.get(label) else {
                continue;
            };
            joined = Some(match joined {
                None => found,
                Some(kept) if kept == found => kept,
                Some(kept) => {
                    // This write joins two units: one unit, still in the order emitted.
                    let moved = std::mem::take(&mut units[found]);
                    units[kept].extend(moved);
                    units[kept].sort_unstable();
                    for unit in unit_of_label.values_mut() {
                        if *unit == found {
                            *unit = kept;
                        }
                    }
                    kept
                }
            });
        }
        let unit = match joined {
            Some(unit) => {
                units[unit].push(index);
                unit
            }
            None => {
                units.push(vec![index]);
                units.len() - 1
            }
        };
        for label in labels {
            unit_of_label.insert(label, unit);
        }
        match first_of.get(&identical) {
            Some(&first) => planned[index].copy_of = Some(planned[first].place),
            None => {
                first_of.insert(identical, index);
            }
        }
    }
    units.retain(|unit| !unit.is_empty());
    units
}
