//! Application values tools reach through [`Ctx::state`](crate::Ctx::state): clients, pools,
//! configuration.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

use crate::error::ToolError;

/// A map from type to one shared value of that type.
#[derive(Clone, Default)]
pub struct State {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl State {
    /// Stores `value`, replacing any earlier value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, or an internal error naming the missing type.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<&T, ToolError> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .ok_or_else(|| {
                ToolError::internal("the tool is not configured")
                    .why(format!(
                        "no `{}` was given to the dispatcher (DispatcherBuilder::state)",
                        type_name::<T>()
                    ))
                    .next("do not repeat this call; tell the user the tool is unavailable")
            })
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("values", &self.values.len())
            .finish()
    }
}
