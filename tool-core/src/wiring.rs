//! Wiring mistakes: what [`DispatcherBuilder::try_build`](crate::dispatch::DispatcherBuilder::try_build)
//! refuses, so that they surface when the dispatcher is built rather than on the first call.

use crate::registry::Registry;
use crate::side_effect::SideEffect;
use crate::state::StateMap;

/// A dispatcher that cannot be built as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A write or destructive tool is registered, but no store records its operations.
    #[error(
        "the tool `{tool}` is a {side_effect} tool and its operations must be recorded, but the dispatcher has no store: add `DispatcherBuilder::store(...)` with a store such as `toolgate::store::SqliteStore` (feature `sqlite`) or `toolgate::store::PostgresStore` (feature `postgres`)"
    )]
    MissingStore {
        /// The tool's wire name.
        tool: &'static str,
        /// Its side-effect class.
        side_effect: SideEffect,
    },
    /// A tool takes a `State<T>` whose `T` the dispatcher was not given.
    #[error(
        "the tool `{tool}` takes `State<{state}>`, but the dispatcher holds no `{state}`: add `DispatcherBuilder::state(value)` with a value of that type"
    )]
    MissingState {
        /// The tool's wire name.
        tool: &'static str,
        /// The name of the missing type.
        state: &'static str,
    },
    /// An [`OutboxWorker`](crate::outbox::OutboxWorker) was built without a handler: it would lease
    /// nothing.
    #[error(
        "the outbox worker has no handler: add `OutboxWorkerBuilder::deliver(tool, handler)` for each outbox tool it delivers"
    )]
    NoHandlers,
}

/// The first wiring mistake, tools in registration order.
pub(crate) fn check(
    registry: &Registry,
    has_store: bool,
    state: &StateMap,
) -> Result<(), BuildError> {
    for tool in registry.iter() {
        let descriptor = tool.descriptor();
        if !has_store && descriptor.side_effect != SideEffect::Read {
            return Err(BuildError::MissingStore {
                tool: descriptor.name,
                side_effect: descriptor.side_effect,
            });
        }
        if let Some(missing) = descriptor
            .state
            .iter()
            .find(|needed| !state.contains(needed.type_id()))
        {
            return Err(BuildError::MissingState {
                tool: descriptor.name,
                state: missing.type_name(),
            });
        }
    }
    Ok(())
}
