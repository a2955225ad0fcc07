//! Every schema in every catalog format: valid JSON Schema 2020-12, the OpenAI strict ones obey
//! every strict-mode rule, the Gemini ones have no `$ref`. Checked on the demo shop's tools and on
//! a tool with nested structs, enums, options and vectors.

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate::Registry;
use toolgate::prelude::*;
use toolgate::provider::{FORMAT_NAMES, format_by_name};
use toolgate_demo::shop;

#[allow(dead_code)] // only its schema matters here
#[derive(Debug, Deserialize, schemars::JsonSchema)]
enum Priority {
    Low,
    High,
}

#[allow(dead_code)] // only its schema matters here
#[derive(Debug, Deserialize, schemars::JsonSchema)]
enum Delivery {
    /// Sent by mail.
    Mail { address: Address },
    /// Picked up at a store.
    Pickup(String),
    /// Handed over in person.
    InPerson,
}

#[allow(dead_code)] // only its schema matters here
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Address {
    /// Street and number.
    street: String,
    city: String,
    /// Postal code, when the country has them.
    postal_code: Option<String>,
    lines: Vec<String>,
}

#[allow(dead_code)] // only its schema matters here
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Item {
    sku: String,
    quantity: u32,
    gift: Option<bool>,
}

/// Ship a replacement order.
#[tool(side_effect = "write", permission = "orders:write", key = [order_id])]
async fn ship_replacement(
    /// The order being replaced.
    order_id: String,
    /// What to send.
    items: Vec<Item>,
    /// Where to send it.
    delivery: Delivery,
    /// How urgent it is.
    priority: Option<Priority>,
    /// Where to send the invoice, if not the delivery address.
    billing: Option<Address>,
    /// Free-form notes.
    notes: Vec<Option<String>>,
    weight_grams: Option<u64>,
    expedite: bool,
) -> Result<(), ToolError> {
    let _ = (
        order_id,
        items,
        delivery,
        priority,
        billing,
        notes,
        weight_grams,
        expedite,
    );
    Ok(())
}

/// Delete a customer record for good.
#[tool(side_effect = "destructive", permission = "customers:delete")]
async fn delete_customer(customer_id: String) -> Result<(), ToolError> {
    let _ = customer_id;
    Ok(())
}

fn registry() -> Registry {
    let mut registry = shop::registry();
    registry
        .register::<ship_replacement>()
        .unwrap()
        .register::<delete_customer>()
        .unwrap();
    registry
}

/// The argument schema inside one declaration of `format`.
fn parameters<'a>(format: &str, declaration: &'a Value) -> Option<&'a Value> {
    match format {
        "openai" | "openai-strict" => declaration["function"].get("parameters"),
        "openai-responses" => declaration.get("parameters"),
        "anthropic" | "anthropic-strict" => declaration.get("input_schema"),
        "gemini" => declaration
            .get("parameters")
            .or_else(|| declaration.get("parametersJsonSchema")),
        "mcp" => declaration.get("inputSchema"),
        other => panic!("unknown format {other}"),
    }
}

#[test]
fn every_catalog_schema_is_valid_json_schema_2020_12() {
    let registry = registry();
    for format in FORMAT_NAMES {
        let catalog = format_by_name(format).unwrap().catalog(&registry);
        assert_eq!(catalog.len(), registry.len(), "{format}");
        for declaration in &catalog {
            let Some(schema) = parameters(format, declaration) else {
                assert_eq!(
                    format, "gemini",
                    "only Gemini omits the parameters of a tool without any"
                );
                continue;
            };
            let mut schema = schema.clone();
            if let Some(object) = schema.as_object_mut() {
                object.insert(
                    "$schema".into(),
                    json!("https://json-schema.org/draft/2020-12/schema"),
                );
            }
            if let Err(err) = jsonschema::meta::validate(&schema) {
                panic!("{format}: {declaration}\nis not JSON Schema 2020-12: {err}");
            }
        }
    }
}

const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Checks one subschema against OpenAI's strict-mode rules; `depth` counts nested objects.
fn check_strict(schema: &Value, at: &str, depth: usize, properties_seen: &mut usize) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{at}: a strict schema is an object, got {schema}"));
    for keyword in object.keys() {
        assert!(
            STRICT_KEYWORDS.contains(&keyword.as_str()),
            "{at}: `{keyword}` is not allowed in strict mode"
        );
    }
    if let Some(format) = object.get("format") {
        assert!(
            STRICT_FORMATS.contains(&format.as_str().unwrap()),
            "{at}: format {format} is not supported"
        );
    }
    let is_object = object.get("type") == Some(&json!("object"))
        || object
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("object")))
        || object.contains_key("properties");
    let mut depth = depth;
    if is_object {
        depth += 1;
        assert!(depth <= 10, "{at}: more than 10 levels of nesting");
        assert_eq!(
            object.get("additionalProperties"),
            Some(&json!(false)),
            "{at}: additionalProperties must be false"
        );
        let properties = object
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{at}: an object needs properties"));
        *properties_seen += properties.len();
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default();
        for name in properties.keys() {
            assert!(
                required.contains(&name.as_str()),
                "{at}: property `{name}` must be required"
            );
        }
        for (name, sub) in properties {
            check_strict(
                sub,
                &format!("{at}/properties/{name}"),
                depth,
                properties_seen,
            );
        }
    }
    if let Some(items) = object.get("items") {
        check_strict(items, &format!("{at}/items"), depth, properties_seen);
    }
    if let Some(any_of) = object.get("anyOf") {
        for (i, sub) in any_of.as_array().unwrap().iter().enumerate() {
            check_strict(sub, &format!("{at}/anyOf/{i}"), depth, properties_seen);
        }
    }
    if let Some(defs) = object.get("$defs") {
        for (name, sub) in defs.as_object().unwrap() {
            check_strict(sub, &format!("{at}/$defs/{name}"), depth, properties_seen);
        }
    }
}

#[test]
fn openai_strict_schemas_obey_every_strict_rule() {
    let registry = registry();
    for format in ["openai-strict", "openai-responses"] {
        for declaration in format_by_name(format).unwrap().catalog(&registry) {
            let (strict, schema) = match format {
                "openai-strict" => (
                    &declaration["function"]["strict"],
                    &declaration["function"]["parameters"],
                ),
                _ => (&declaration["strict"], &declaration["parameters"]),
            };
            assert_eq!(
                strict,
                &json!(true),
                "{format}: every demo tool lowers to strict: {declaration}"
            );
            let object = schema.as_object().unwrap();
            assert_eq!(object["type"], "object", "the root is an object");
            assert!(!object.contains_key("anyOf"), "the root is not anyOf");
            let mut properties = 0;
            check_strict(schema, format, 0, &mut properties);
            assert!(properties <= 5_000);
        }
    }
}

#[test]
fn optional_arguments_are_required_and_nullable_in_strict_mode() {
    let catalog = format_by_name("openai-strict")
        .unwrap()
        .catalog(&registry());
    let ship = catalog
        .iter()
        .find(|d| d["function"]["name"] == "ship_replacement")
        .unwrap();
    let schema = &ship["function"]["parameters"];
    assert_eq!(
        schema["required"],
        json!([
            "order_id",
            "items",
            "delivery",
            "priority",
            "billing",
            "notes",
            "weight_grams",
            "expedite"
        ])
    );
    let weight = &schema["properties"]["weight_grams"];
    assert!(
        weight["type"].as_array().unwrap().contains(&json!("null")),
        "{weight}"
    );
}

fn find_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| find_key(v, key)),
        Value::Array(items) => items.iter().any(|v| find_key(v, key)),
        _ => false,
    }
}

#[test]
fn gemini_schemas_have_no_ref() {
    let catalog = format_by_name("gemini").unwrap().catalog(&registry());
    for declaration in &catalog {
        assert!(
            declaration.get("parametersJsonSchema").is_none(),
            "every demo tool lowers: {declaration}"
        );
        assert!(!find_key(declaration, "$ref"), "{declaration}");
        assert!(!find_key(declaration, "$defs"), "{declaration}");
        assert!(
            !find_key(declaration, "additionalProperties"),
            "{declaration}"
        );
    }
    let ship = catalog
        .iter()
        .find(|d| d["name"] == "ship_replacement")
        .unwrap();
    let billing = &ship["parameters"]["properties"]["billing"];
    assert_eq!(billing["nullable"], true, "{billing}");
    assert_eq!(
        billing["properties"]["street"]["type"], "string",
        "{billing}"
    );
}

#[test]
fn descriptions_state_the_side_effect_class() {
    let catalog = format_by_name("anthropic").unwrap().catalog(&registry());
    let description = |name: &str| {
        catalog.iter().find(|d| d["name"] == name).unwrap()["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(description("get_order").contains("Read-only"));
    let refund = description("issue_refund");
    assert!(
        refund.starts_with("Refund part or all of a paid order. The refund is final."),
        "{refund}"
    );
    assert!(
        refund.contains("returns the original result instead of acting twice"),
        "{refund}"
    );
    // The threshold is stated; the `approvals` tests make the call it speaks of, and it waits.
    assert!(
        refund.contains("A call whose `amount` is over 5000 waits for a human approval"),
        "{refund}"
    );
    assert!(description("delete_customer").contains("irreversibly"));
}

#[test]
fn mcp_annotations_follow_the_side_effect() {
    let catalog = format_by_name("mcp").unwrap().catalog(&registry());
    let annotations =
        |name: &str| catalog.iter().find(|d| d["name"] == name).unwrap()["annotations"].clone();
    assert_eq!(annotations("get_order")["readOnlyHint"], true);
    assert_eq!(annotations("issue_refund")["readOnlyHint"], false);
    assert_eq!(annotations("issue_refund")["destructiveHint"], false);
    assert_eq!(annotations("issue_refund")["idempotentHint"], true);
    assert_eq!(annotations("delete_customer")["destructiveHint"], true);
}

#[test]
fn the_refund_amount_takes_at_most_two_decimals() {
    let registry = shop::registry();
    let validator = registry.get("issue_refund").unwrap().validator();
    for good in [
        json!(500),
        json!(10.07),
        json!(0.29),
        json!(1234.56),
        json!(0.01),
        json!(8000),
    ] {
        let args = json!({"order_id": "ORD-1001", "amount": good});
        assert!(
            validator.violations(&args).is_empty(),
            "{good} should be accepted"
        );
    }
    for bad in [json!(0), json!(-5), json!(10.001), json!(0.005)] {
        let args = json!({"order_id": "ORD-1001", "amount": bad});
        assert!(
            !validator.violations(&args).is_empty(),
            "{bad} should be rejected"
        );
    }
}

#[test]
fn an_order_id_is_told_and_checked_by_its_pattern() {
    let registry = shop::registry();
    let huge = format!("ORD-{}", "1".repeat(300_000));
    for tool in ["get_order", "issue_refund"] {
        let validator = registry.get(tool).unwrap().validator();
        let args = |order_id: &str| json!({"order_id": order_id, "amount": 5});
        let args_of = |order_id: &str| match tool {
            "get_order" => json!({ "order_id": order_id }),
            _ => args(order_id),
        };
        for good in ["ORD-1001", "ORD-9999999999", "ORD-1"] {
            assert!(
                validator.violations(&args_of(good)).is_empty(),
                "{tool}: {good} should be accepted"
            );
        }
        for bad in [
            huge.as_str(),
            "ORD-1001/../refunds",
            "ORD-1001?x=1",
            "ORD-1001%2F",
            "ORD-1001#x",
            "ORD-",
            "ord-1001",
            "ORD-12345678901",
            "ORD-1001\n",
        ] {
            let violations = validator.violations(&args_of(bad));
            assert!(
                violations.iter().any(|v| v.pointer == "/order_id"),
                "{tool}: {bad:.40} should be rejected: {violations:?}"
            );
        }
    }
    // Every format tells the model what an order id looks like before it calls.
    for format in FORMAT_NAMES {
        let catalog = format_by_name(format).unwrap().catalog(&registry);
        for declaration in &catalog {
            let Some(parameters) = parameters(format, declaration) else {
                continue;
            };
            let order_id = &parameters["properties"]["order_id"];
            assert_eq!(
                order_id["pattern"],
                shop::ORDER_ID_PATTERN,
                "{format}: {declaration}"
            );
        }
    }
}
