//! Why an [`McpServer`](crate::McpServer) cannot be built as configured.

/// An [`McpServer`](crate::McpServer) that cannot be built as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A tool's argument schema is not an object schema: MCP declares a tool's arguments with
    /// an `inputSchema` whose `type` is `"object"`.
    #[error(
        "the tool `{tool}` cannot be declared over MCP: its argument schema must be an object schema (`\"type\": \"object\"`), but {reason}"
    )]
    NotAnObjectSchema {
        /// The tool's wire name.
        tool: String,
        /// What is wrong with its schema.
        reason: String,
    },
    /// An entry of the HTTP service's allowed origins cannot be read
    /// ([`McpServer::http_service_with`](crate::McpServer::http_service_with)).
    #[error("{reason}")]
    AllowedOrigin {
        /// Which entry, and what to write instead.
        reason: String,
    },
}
