//! `tools/list`: the registry's tools as MCP declares them, built once from toolgate's MCP
//! catalog so that one function decides their shape, each with the permission it needs, so that
//! a session is listed the tools it may call.

use rmcp::model::Tool;
use serde_json::Value;
use toolgate_core::provider::{Mcp, WireFormat};
use toolgate_core::{AuthContext, Registry};

use crate::build_error::BuildError;

/// The server's tools as `tools/list` declares them, in registration order, and the
/// permission each needs.
#[derive(Debug)]
pub(crate) struct Catalog {
    tools: Vec<Tool>,
    permissions: Vec<Option<&'static str>>,
}

impl Catalog {
    /// The catalog of `registry` (see [`tools`]).
    pub(crate) fn of(registry: &Registry, additional_properties: bool) -> Result<Self, BuildError> {
        let tools = tools(registry, additional_properties)?;
        let permissions = tools
            .iter()
            .map(|tool| {
                registry
                    .get(&tool.name)
                    .and_then(|registered| registered.descriptor().permission)
            })
            .collect();
        Ok(Catalog { tools, permissions })
    }

    /// Every tool.
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// How many tools there are.
    pub(crate) fn len(&self) -> usize {
        self.tools.len()
    }

    /// The place of the tool named `name`, if there is one.
    pub(crate) fn place(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|tool| tool.name == name)
    }

    /// Whether `auth` may call the tool at `place`: it needs no permission, or one `auth` holds.
    pub(crate) fn permits(&self, place: usize, auth: &AuthContext) -> bool {
        self.permissions[place].is_none_or(|permission| auth.has_permission(permission))
    }

    /// The tools `auth` may call, and their places.
    pub(crate) fn listed_for(&self, auth: &AuthContext) -> (Vec<Tool>, Vec<usize>) {
        (0..self.tools.len())
            .filter(|&place| self.permits(place, auth))
            .map(|place| (self.tools[place].clone(), place))
            .unzip()
    }
}

/// Every tool of `registry`, in registration order, as [`Mcp`]'s catalog declares it (name,
/// description, `inputSchema`, annotations from the side-effect class), or the first tool MCP
/// cannot declare: one whose argument schema is not an object schema (`"type": "object"`).
/// With `additional_properties` false, every `additionalProperties` keyword is taken out of the
/// schemas served (the dispatcher validates against the full schema all the same).
pub(crate) fn tools(
    registry: &Registry,
    additional_properties: bool,
) -> Result<Vec<Tool>, BuildError> {
    Mcp.catalog(registry)
        .into_iter()
        .map(|mut declared| {
            if !additional_properties {
                without_additional_properties(&mut declared["inputSchema"]);
            }
            let name = declared["name"].as_str().unwrap_or_default().to_owned();
            if declared["inputSchema"]["type"] != "object" {
                return Err(BuildError::NotAnObjectSchema {
                    tool: name,
                    reason: format!("its schema is {}", declared["inputSchema"]),
                });
            }
            serde_json::from_value(declared).map_err(|err| BuildError::NotAnObjectSchema {
                tool: name,
                reason: err.to_string(),
            })
        })
        .collect()
}

/// `schema` without any `additionalProperties` keyword, at any depth. A property that happens to
/// be named `additionalProperties` (a key of `properties`) is kept.
fn without_additional_properties(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("additionalProperties");
            for (keyword, value) in map.iter_mut() {
                if keyword == "properties" || keyword == "$defs" || keyword == "definitions" {
                    // A map of names to schemas: each value is a schema.
                    if let Value::Object(named) = value {
                        named.values_mut().for_each(without_additional_properties);
                    }
                } else {
                    without_additional_properties(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(without_additional_properties),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use toolgate::prelude::*;
    use toolgate_core::{
        Ctx,
        tool::{JsonText, ToolDescriptor, ToolFuture},
    };

    use super::*;

    /// Look up an order.
    #[tool(permission = "orders:read")]
    async fn get_order(order_id: String) -> Result<String, ToolError> {
        Ok(order_id)
    }

    /// Cancel an order.
    #[tool(side_effect = "destructive", key = [order_id])]
    async fn cancel_order(order_id: String) -> Result<String, ToolError> {
        Ok(order_id)
    }

    #[test]
    fn the_tools_are_the_mcp_catalog_typed() {
        let mut registry = Registry::new();
        registry
            .register::<get_order>()
            .unwrap()
            .register::<cancel_order>()
            .unwrap();
        let tools = tools(&registry, true).unwrap();
        let typed: Vec<Value> = tools
            .iter()
            .map(|tool| serde_json::to_value(tool).unwrap())
            .collect();
        assert_eq!(typed, Mcp.catalog(&registry));
        let read = tools[0].annotations.as_ref().unwrap();
        assert_eq!(read.read_only_hint, Some(true));
        let destructive = tools[1].annotations.as_ref().unwrap();
        assert_eq!(
            (destructive.destructive_hint, destructive.idempotent_hint),
            (Some(true), Some(true))
        );
    }

    /// A hand-written tool whose schema accepts any value: MCP cannot declare it.
    struct Anything;

    static ANYTHING: ToolDescriptor = ToolDescriptor::new("anything", "Takes any value.");

    impl toolgate_core::Tool for Anything {
        fn descriptor(&self) -> &'static ToolDescriptor {
            &ANYTHING
        }

        fn args_schema(&self) -> Value {
            json!(true)
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
        }
    }

    #[test]
    fn a_tool_whose_schema_is_not_an_object_schema_is_named() {
        let mut registry = Registry::new();
        registry.register_tool(Anything).unwrap();
        let err = tools(&registry, true).unwrap_err();
        assert_eq!(
            err,
            BuildError::NotAnObjectSchema {
                tool: "anything".into(),
                reason: "its schema is true".into()
            }
        );
        assert!(err.to_string().contains("`anything`"));
    }

    #[test]
    fn additional_properties_are_taken_out_at_every_depth_and_a_property_of_that_name_kept() {
        let mut schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "additionalProperties": {"type": "string"},
                "line": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"sku": {"type": "string"}}
                },
                "tags": {"type": "array", "items": {"type": "object", "additionalProperties": false}}
            },
            "$defs": {"Money": {"type": "object", "additionalProperties": false}},
            "anyOf": [{"type": "object", "additionalProperties": {"type": "integer"}}]
        });
        without_additional_properties(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "additionalProperties": {"type": "string"},
                    "line": {"type": "object", "properties": {"sku": {"type": "string"}}},
                    "tags": {"type": "array", "items": {"type": "object"}}
                },
                "$defs": {"Money": {"type": "object"}},
                "anyOf": [{"type": "object"}]
            })
        );
    }
}
