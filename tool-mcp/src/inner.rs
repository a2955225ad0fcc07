//! What every session of one [`McpServer`](crate::McpServer) shares: the dispatcher, the
//! session hook, the catalog of tools, the server's description and the calls in flight.

use std::sync::Arc;

use rmcp::model::ServerConfig;
use toolgate_core::Dispatcher;

use crate::catalog::Catalog;
use crate::hook::SessionHook;
use crate::in_flight::InFlight;

/// The state a server's clones and sessions share.
pub(crate) struct Inner {
    pub(crate) dispatcher: Dispatcher,
    pub(crate) hook: Box<dyn SessionHook>,
    /// The tools as `tools/list` declares them, made once: the registry cannot change after it
    /// is built. Each session is listed those it may call.
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) info: ServerConfig,
    pub(crate) in_flight: InFlight,
}
