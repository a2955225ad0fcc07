//! Application values tools need: clients, pools, configuration. Give each to the dispatcher
//! with [`DispatcherBuilder::state`](crate::dispatch::DispatcherBuilder::state); a tool takes one as a
//! [`State<T>`] parameter, which the dispatcher checks when it is built.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

use crate::error::ToolError;

/// An application value of type `T`, injected into a tool: declare a `shop: State<Shop>`
/// parameter and give the dispatcher a `Shop` with
/// [`DispatcherBuilder::state`](crate::dispatch::DispatcherBuilder::state). It never appears in the
/// schema, and [`DispatcherBuilder::try_build`](crate::dispatch::DispatcherBuilder::try_build) refuses a
/// registry with a tool whose `T` the dispatcher lacks.
///
/// ```
/// use toolgate::prelude::*;
/// use toolgate::State;
///
/// struct Shop { name: &'static str }
///
/// /// Say which shop this is.
/// #[tool]
/// async fn shop_name(shop: State<Shop>) -> Result<String, ToolError> {
///     Ok(shop.name.to_owned())
/// }
///
/// let mut registry = Registry::new();
/// registry.register::<shop_name>().unwrap();
/// let refused = Dispatcher::builder(registry).try_build();
/// assert!(refused.unwrap_err().to_string().contains("DispatcherBuilder::state(value)"));
/// ```
pub struct State<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for State<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// A map from type to one shared value of that type.
#[derive(Clone, Default)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    /// Stores `value`, replacing any earlier value of the same type.
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// Stores the value `value` points to, shared with whoever else holds it.
    pub(crate) fn insert_shared<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    /// Whether a value of the type `id` is held.
    pub(crate) fn contains(&self, id: TypeId) -> bool {
        self.values.contains_key(&id)
    }

    /// The value of type `T`, or an internal error naming the missing type.
    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Result<&T, ToolError> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .ok_or_else(missing::<T>)
    }

    /// A shared handle on the value of type `T`, or an internal error naming the missing type.
    pub(crate) fn get_shared<T: Send + Sync + 'static>(&self) -> Result<State<T>, ToolError> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| Arc::clone(value).downcast::<T>().ok())
            .map(State)
            .ok_or_else(missing::<T>)
    }
}

fn missing<T>() -> ToolError {
    ToolError::internal("the tool is not configured")
        .with_why(format!(
            "no `{}` was given to the dispatcher (DispatcherBuilder::state)",
            type_name::<T>()
        ))
        .with_next("do not repeat this call; tell the user the tool is unavailable")
}

impl std::fmt::Debug for StateMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMap")
            .field("values", &self.values.len())
            .finish()
    }
}

/// A type a tool takes as [`State<T>`], as `#[tool]` records it in the descriptor: the
/// dispatcher checks it is given one when it is built.
#[derive(Clone, Copy)]
pub struct StateType {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
}

impl StateType {
    /// The type `T`.
    pub const fn of<T: Send + Sync + 'static>() -> Self {
        StateType {
            type_id: TypeId::of::<T>,
            type_name: type_name::<T>,
        }
    }

    /// Its `TypeId`.
    pub fn type_id(&self) -> TypeId {
        (self.type_id)()
    }

    /// Its name, as `std::any::type_name` gives it.
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }
}

impl std::fmt::Debug for StateType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.type_name())
    }
}
