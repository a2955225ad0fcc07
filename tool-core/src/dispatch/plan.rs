//! A turn's calls before any of them runs: each looked up and its permission checked (a missing
//! one aborts the run before anything starts), a write's arguments validated and its key
//! derived; then the order they run in. Writes naming the same `resource` value, or sharing an
//! idempotency key, run one after the other in the order the model emitted them, and a write
//! identical to an earlier one of the turn (same key, same arguments) runs once; every other
//! call runs concurrently.

use std::collections::HashMap;

use serde_json::Value;

use crate::auth::Session;
use crate::call::{Arguments, CallReport, ToolCall};
use crate::call_ids::{self, Split};
use crate::error::{ErrorClass, ToolError};
use crate::idempotency::{canonical_json, operation_key, request_hash};
use crate::schema::normalize_numbers;
use crate::text_args::ReadArgs;
use crate::validate::invalid_arguments;

use crate::registry::RegisteredTool;

use super::{Dispatcher, admit, answers, repeat, unwind};

/// The planned calls of a turn: the common turn's one call is not put on the heap.
pub(super) type Plan = smallvec::SmallVec<[Planned; 1]>;

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
        /// The tool's place in the registry, where the read finds it again.
        slot: usize,
        arguments: Arguments,
        /// The arguments as the tool read them from text nothing had checked
        /// ([`TextArgs::read_args`](crate::text_args::TextArgs::read_args)): the text was one
        /// object, and the
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

/// The planner of a session's turns: each call looked up, permitted and, for a write, validated
/// and keyed, before any runs. It uses the dispatcher's registry (through
/// [`Dispatcher::admit`]), its hash secret and its tools' state (a read's arguments are checked
/// by building its call).
pub(super) struct Planner<'a> {
    dispatcher: &'a Dispatcher,
    session: &'a Session,
}

impl Dispatcher {
    /// The planner of `session`'s turns.
    pub(super) fn planner<'a>(&'a self, session: &'a Session) -> Planner<'a> {
        Planner {
            dispatcher: self,
            session,
        }
    }
}

impl Planner<'_> {
    /// A turn's `calls`, each planned in its place; the calls that share an id are answered
    /// instead, each id once, at the place of its first call (see [`call_ids::split_shared`]).
    pub(super) fn plan(&self, calls: Vec<ToolCall>) -> (Plan, Vec<(usize, CallReport)>) {
        let plan = |(place, call)| self.prepare(place, call);
        match call_ids::split_shared(calls) {
            Ok(Split { runs, answered }) => (runs.into_iter().map(plan).collect(), answered),
            // The common turn, no id shared: each call planned in its place.
            Err(calls) => (
                calls.into_iter().enumerate().map(plan).collect(),
                Vec::new(),
            ),
        }
    }

    /// `call`, looked up, permitted and, for a write, validated.
    pub(super) fn prepare(&self, place: usize, call: ToolCall) -> Planned {
        let ToolCall {
            id,
            name,
            arguments,
        } = call;
        let (dispatcher, session) = (self.dispatcher, self.session);
        let step = match dispatcher.admit(session, &name, arguments) {
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
                match Self::checked(registered, arguments, read && permitted.is_ok()) {
                    Err((tool, err)) => Step::Refused {
                        tool,
                        err,
                        fingerprint: None,
                    },
                    Ok((arguments, taken)) if read => {
                        self.prepare_read(&id, registered, arguments, taken, permitted)
                    }
                    Ok((arguments, _)) => self.prepare_write(registered, arguments, permitted),
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
        registered: &RegisteredTool,
        arguments: Arguments,
        one_pass: bool,
    ) -> Result<(Arguments, Option<ReadArgs>), Refusal> {
        let tool = registered.descriptor().name;
        if let (true, Some(text)) = (one_pass, arguments.as_unread()) {
            match unwind::reading(tool, || registered.read_args(text)) {
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

impl Planner<'_> {
    /// A read the session may make, with its arguments as checked (and read, when the tool read
    /// them); one it may not make is refused, after its arguments are validated: the model hears
    /// of invalid arguments first, and a valid call the session may not make aborts.
    fn prepare_read(
        &self,
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
                slot: registered.slot(),
                arguments,
                read,
            };
        };
        match self.valid_read(call_id, registered, &arguments) {
            Err(invalid) => Step::Refused {
                tool: Some(tool),
                err: invalid,
                fingerprint: Some(repeat::fingerprint(
                    &self.dispatcher.inner.hash_secret,
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
        registered: &RegisteredTool,
        arguments: Arguments,
        permitted: Result<(), ToolError>,
    ) -> Step {
        let descriptor = registered.descriptor();
        let tool = descriptor.name;
        let mut args = arguments.into_value();
        normalize_numbers(&mut args);
        let canonical = canonical_json(&args);
        let hash = request_hash(&self.dispatcher.inner.hash_secret, tool, &canonical);
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
        let session = self.session;
        let key = operation_key(descriptor, session.auth().tenant(), session.run_id(), &args);
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
        call_id: &str,
        registered: &RegisteredTool,
        arguments: &Arguments,
    ) -> Result<(), ToolError> {
        if let Some(text) = arguments.as_text() {
            let ctx = self.dispatcher.ctx(self.session, call_id, registered);
            let name = registered.descriptor().name;
            if unwind::reading(name, || registered.invoke_text(&ctx, text).is_some())? {
                return Ok(());
            }
        }
        self.dispatcher
            .validated(registered, arguments.to_value())
            .map(drop)
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
    let mut units = Units {
        units: Vec::with_capacity(planned.len()),
        unit_of_label: HashMap::new(),
    };
    for (index, call) in planned.iter().enumerate() {
        match &call.step {
            Step::Write(write) => units.add_write(index, labels(write)),
            _ => units.units.push(vec![index]),
        }
    }
    mark_identical(planned);
    let mut units = units.units;
    units.retain(|unit| !unit.is_empty());
    units
}

/// What orders a write after others: its `resource` value, when its tool declares one, and
/// its key.
fn labels(write: &PreparedWrite) -> Vec<String> {
    write
        .resource
        .iter()
        .map(|value| format!("resource:{value}"))
        .chain(std::iter::once(format!("key:{}", write.key)))
        .collect()
}

/// The units of a turn of several calls (see [`units`]), each holding its calls in the order
/// they run.
pub(super) fn units_of(mut planned: Vec<Planned>) -> Vec<Vec<Planned>> {
    let units = units(&mut planned);
    let mut slots: Vec<Option<Planned>> = planned.into_iter().map(Some).collect();
    units
        .into_iter()
        .map(|unit| {
            unit.into_iter()
                .filter_map(|index| slots[index].take())
                .collect()
        })
        .collect()
}

/// Marks each write identical to an earlier one of the turn (same key, same arguments) as a
/// copy of the first of them.
fn mark_identical(planned: &mut [Planned]) {
    let mut first_of: HashMap<(String, String), usize> = HashMap::new();
    for index in 0..planned.len() {
        let Step::Write(write) = &planned[index].step else {
            continue;
        };
        let identical = (write.key.clone(), write.hash.clone());
        match first_of.get(&identical) {
            Some(&first) => planned[index].copy_of = Some(planned[first].place),
            None => {
                first_of.insert(identical, index);
            }
        }
    }
}

/// The units of a turn as its writes join them; a unit merged into another is left empty.
struct Units {
    units: Vec<Vec<usize>>,
    /// The unit of each label a write of it has (see [`labels`]).
    unit_of_label: HashMap<String, usize>,
}

impl Units {
    /// The write at `index`, with its `labels`, in the unit of an earlier write that shares a
    /// label (the units of several merged into one), or in a unit of its own.
    fn add_write(&mut self, index: usize, labels: Vec<String>) {
        let unit = match self.joined(&labels) {
            Some(unit) => {
                self.units[unit].push(index);
                unit
            }
            None => {
                self.units.push(vec![index]);
                self.units.len() - 1
            }
        };
        for label in labels {
            self.unit_of_label.insert(label, unit);
        }
    }

    /// The unit that holds the writes sharing one of `labels`, if any: when they are in
    /// several, those are merged into the first found.
    fn joined(&mut self, labels: &[String]) -> Option<usize> {
        let mut joined: Option<usize> = None;
        for label in labels {
            let Some(&found) = self.unit_of_label.get(label) else {
                continue;
            };
            joined = Some(match joined {
                None => found,
                Some(kept) if kept == found => kept,
                Some(kept) => self.merge(kept, found),
            });
        }
        joined
    }

    /// Unit `found` moved into unit `kept`, still in the order emitted; answers `kept`.
    fn merge(&mut self, kept: usize, found: usize) -> usize {
        let moved = std::mem::take(&mut self.units[found]);
        self.units[kept].extend(moved);
        self.units[kept].sort_unstable();
        for unit in self.unit_of_label.values_mut() {
            if *unit == found {
                *unit = kept;
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ctx::Ctx;
    use crate::error::ErrorKind;
    use crate::json_text::JsonText;
    use crate::store::MemoryStore;
    use crate::tool::{Tool, ToolDescriptor, ToolFuture};
    use crate::{AuthContext, Registry, SideEffect};

    /// A tool that answers with its arguments, which are `{"order": <string>}`.
    struct Orders(&'static ToolDescriptor);

    impl Tool for Orders {
        fn descriptor(&self) -> &'static ToolDescriptor {
            self.0
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"], "additionalProperties": false})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
        }
    }

    static LOOKUP: ToolDescriptor =
        ToolDescriptor::new("lookup", "Looks an order up.").with_permission("orders:read");
    static REFUND: ToolDescriptor = ToolDescriptor::new("refund", "Refunds an order.")
        .with_side_effect(SideEffect::Write)
        .with_permission("orders:refund")
        .with_resource("order");

    fn dispatcher() -> Dispatcher {
        let mut registry = Registry::new();
        registry.register_tool(Orders(&LOOKUP)).unwrap();
        registry.register_tool(Orders(&REFUND)).unwrap();
        Dispatcher::builder(registry)
            .store(MemoryStore::new())
            .build()
    }

    fn session(permissions: &[&str]) -> Session {
        let auth = AuthContext::new("acme", "agent").with_permissions(permissions.iter().copied());
        Session::new(auth, "run-1")
    }

    fn call(id: &str, tool: &str, order: &str) -> ToolCall {
        ToolCall::new(id, tool, json!({"order": order}))
    }

    /// The kind of error a refused step answers, and whether it aborts the run.
    fn refused(step: &Step) -> Option<(ErrorKind, bool)> {
        match step {
            Step::Refused { err, .. } => Some((err.kind(), step.abort().is_some())),
            _ => None,
        }
    }

    #[test]
    fn each_call_is_planned_as_what_it_does() {
        let dispatcher = dispatcher();
        let session = session(&["orders:read", "orders:refund"]);
        let planner = dispatcher.planner(&session);
        let read = planner.prepare(0, call("c1", "lookup", "ORD-1"));
        assert!(matches!(read.step, Step::Read { tool: "lookup", .. }));
        let write = planner.prepare(1, call("c2", "refund", "ORD-1"));
        let Step::Write(prepared) = &write.step else {
            panic!("a write");
        };
        assert_eq!((write.place, &*write.id), (1, "c2"));
        assert_eq!(prepared.resource.as_deref(), Some(r#""ORD-1""#));
        assert_eq!(prepared.canonical, r#"{"order":"ORD-1"}"#);
        // The same arguments, the same key; other arguments, another.
        let again = planner.prepare(2, call("c3", "refund", "ORD-1"));
        let other = planner.prepare(3, call("c4", "refund", "ORD-2"));
        let key = |planned: &Planned| match &planned.step {
            Step::Write(write) => write.key.clone(),
            _ => panic!("a write"),
        };
        assert_eq!(key(&write), key(&again));
        assert_ne!(key(&write), key(&other));
    }

    #[test]
    fn a_call_is_refused_before_it_runs() {
        use ErrorKind::*;
        let dispatcher = dispatcher();
        let bad = ToolCall::new("c", "refund", json!({"order": 7}));
        let bad_read = ToolCall::new("c", "lookup", json!({"order": 7}));
        // (the session's permissions, the call, the error, whether it aborts the run)
        let cases = [
            (
                &["orders:read"][..],
                call("c", "nothing", "ORD-1"),
                Some((UnknownTool, false)),
            ),
            (&["orders:refund"], bad, Some((InvalidArguments, false))),
            (&[], bad_read, Some((InvalidArguments, false))),
            // Valid arguments the session may not send abort the run.
            (
                &["orders:read"],
                call("c", "refund", "ORD-1"),
                Some((PermissionDenied, true)),
            ),
            (
                &["orders:refund"],
                call("c", "lookup", "ORD-1"),
                Some((PermissionDenied, true)),
            ),
            (&["orders:refund"], call("c", "refund", "ORD-1"), None),
        ];
        for (permissions, call, expected) in cases {
            let session = session(permissions);
            let described = format!("{} {:?} with {permissions:?}", call.name, call.arguments);
            let planned = dispatcher.planner(&session).prepare(0, call);
            assert_eq!(refused(&planned.step), expected, "{described}");
        }
    }

    #[test]
    fn calls_sharing_an_id_are_answered_instead_of_planned() {
        let dispatcher = dispatcher();
        let session = session(&["orders:read"]);
        let calls = vec![
            call("c1", "lookup", "ORD-1"),
            call("c2", "lookup", "ORD-2"),
            call("c1", "lookup", "ORD-3"),
        ];
        let (planned, answered) = dispatcher.planner(&session).plan(calls);
        let planned: Vec<_> = planned.iter().map(|call| (call.place, &*call.id)).collect();
        assert_eq!(planned, [(1, "c2")]);
        assert_eq!(answered.len(), 1);
        assert_eq!((answered[0].0, &*answered[0].1.call_id), (0, "c1"));
    }

    /// A planned write of `tool`'s `key`, with `resource` and `hash`.
    fn write(place: usize, key: &str, resource: Option<&str>, hash: &str) -> Planned {
        let write = PreparedWrite {
            tool: "refund",
            args: json!({}),
            canonical: "{}".to_owned(),
            hash: hash.to_owned(),
            key: key.to_owned(),
            resource: resource.map(str::to_owned),
        };
        Planned::new(
            place,
            format!("c{place}"),
            "refund".to_owned(),
            Step::Write(Box::new(write)),
        )
    }

    fn read(place: usize) -> Planned {
        let step = Step::Read {
            tool: "lookup",
            slot: 0,
            arguments: Arguments::from(json!({})),
            read: None,
        };
        Planned::new(place, format!("c{place}"), "lookup".to_owned(), step)
    }

    #[test]
    fn writes_on_one_resource_or_key_run_in_order_and_the_rest_concurrently() {
        // (the turn, its units)
        let cases: Vec<(Vec<Planned>, Vec<Vec<usize>>)> = vec![
            (vec![read(0), read(1)], vec![vec![0], vec![1]]),
            (
                vec![
                    write(0, "k1", Some("a"), "h1"),
                    write(1, "k2", Some("b"), "h2"),
                ],
                vec![vec![0], vec![1]],
            ),
            // One resource: one unit, in the order emitted.
            (
                vec![
                    write(0, "k1", Some("a"), "h1"),
                    read(1),
                    write(2, "k2", Some("a"), "h2"),
                ],
                vec![vec![0, 2], vec![1]],
            ),
            // One key, no resource.
            (
                vec![write(0, "k1", None, "h1"), write(1, "k1", None, "h2")],
                vec![vec![0, 1]],
            ),
            // A write on resource `a` with key `k2` joins the units of `a` and of `k2`.
            (
                vec![
                    write(0, "k1", Some("a"), "h1"),
                    write(1, "k2", Some("b"), "h2"),
                    write(2, "k3", Some("c"), "h3"),
                    write(3, "k2", Some("a"), "h4"),
                ],
                vec![vec![0, 1, 3], vec![2]],
            ),
        ];
        for (mut planned, expected) in cases {
            assert_eq!(units(&mut planned), expected);
        }
    }

    #[test]
    fn a_write_identical_to_an_earlier_one_is_its_copy() {
        let mut planned = vec![
            write(0, "k1", None, "h1"),
            write(1, "k1", None, "h2"),
            write(2, "k1", None, "h1"),
            write(3, "k2", None, "h1"),
        ];
        units(&mut planned);
        let copies: Vec<_> = planned.iter().map(|call| call.copy_of).collect();
        assert_eq!(copies, [None, None, Some(0), None]);
    }

    #[test]
    fn the_calls_of_a_tool_beyond_its_grant_are_not_granted() {
        let mut planned = vec![read(0), write(1, "k1", None, "h1"), read(2), read(3)];
        let counts = tool_counts(&planned);
        assert_eq!(counts.as_slice(), [("lookup", 3), ("refund", 1)]);
        apply_grants(&mut planned, counts.as_slice(), &[1, 1]);
        let granted: Vec<_> = planned.iter().map(|call| call.granted).collect();
        assert_eq!(granted, [true, true, false, false]);
    }
}
