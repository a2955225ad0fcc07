//! The limits Anthropic sets on the strict tools of one request, summed over all of them: how
//! many tools, how many optional properties and how many properties of a union type their
//! schemas hold. A registry spends one [`AnthropicBudget`] tool by tool, in registration order,
//! so that its catalog stays within them; one schema alone is checked against an unspent one.

use serde_json::Value;

use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use crate::schema::walk_schemas;

/// The strict tools one Anthropic request takes.
pub(super) const MAX_STRICT_TOOLS: usize = 20;
/// The optional properties (not listed in their object's `required`) all the strict schemas of
/// one request may hold together.
pub(super) const MAX_OPTIONAL: usize = 24;
/// The schemas with a union type (`anyOf`, or a list of types such as `["string", "null"]`)
/// all the strict schemas of one request may hold together.
pub(super) const MAX_UNIONS: usize = 16;

/// What one strict schema holds that counts against the limits of its request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Demand {
    optional: usize,
    unions: usize,
}

impl Demand {
    /// Counts every schema of `lowered`, its `$defs` included.
    fn of(lowered: &Value) -> Self {
        let mut demand = Demand::default();
        walk_schemas(lowered, "", &mut |object, _| {
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                let required = object.get("required").and_then(Value::as_array);
                demand.optional += properties
                    .keys()
                    .filter(|name| {
                        !required.is_some_and(|names| names.iter().any(|listed| listed == *name))
                    })
                    .count();
            }
            let union =
                object.contains_key("anyOf") || object.get("type").is_some_and(Value::is_array);
            demand.unions += usize::from(union);
        });
        demand
    }
}

/// What the strict tools of one Anthropic request use of its limits so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnthropicBudget {
    tools: usize,
    spent: Demand,
}

impl AnthropicBudget {
    /// Counts one more strict tool, whose schema is `lowered`; or, when that would pass one of
    /// the limits, counts nothing and says which.
    pub(super) fn spend(&mut self, lowered: &Value) -> Result<(), LoweringError> {
        const FIX: &str = "register the tools that most need strict tool use first";
        let too_large = |problem: String, fix: String| {
            LoweringError::new(
                LoweringTarget::AnthropicStrict,
                LoweringErrorKind::TooLarge,
                "",
                problem,
                fix,
            )
        };
        if self.tools >= MAX_STRICT_TOOLS {
            return Err(too_large(
                format!(
                    "{} strict tools come before it, as many as one Anthropic request takes",
                    self.tools
                ),
                FIX.to_owned(),
            ));
        }
        let demand = Demand::of(lowered);
        let before = |spent: usize| {
            if self.tools == 0 {
                String::new()
            } else {
                format!(", and the strict tools before it {spent}")
            }
        };
        if self.spent.optional + demand.optional > MAX_OPTIONAL {
            return Err(too_large(
                format!(
                    "the schema has {} optional properties{}; one Anthropic request takes \
                     {MAX_OPTIONAL} in all its strict tools",
                    demand.optional,
                    before(self.spent.optional)
                ),
                format!("make more of its properties required, or {FIX}"),
            ));
        }
        if self.spent.unions + demand.unions > MAX_UNIONS {
            return Err(too_large(
                format!(
                    "the schema has {} schemas of a union type (`anyOf`, or a list of types \
                     such as an `Option`'s){}; one Anthropic request takes {MAX_UNIONS} in all \
                     its strict tools",
                    demand.unions,
                    before(self.spent.unions)
                ),
                format!("use fewer `Option` and enum fields, or {FIX}"),
            ));
        }
        self.tools += 1;
        self.spent.optional += demand.optional;
        self.spent.unions += demand.unions;
        Ok(())
    }
}

/// Checks the limits of one request on one strict schema alone.
pub(super) fn check_anthropic_limits(lowered: &Value) -> Result<(), LoweringError> {
    AnthropicBudget::default().spend(lowered)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    /// An object of `required` strings and `optional` nullable strings.
    fn object(required: usize, optional: usize) -> Value {
        let mut properties = Map::new();
        for index in 0..required {
            properties.insert(format!("r{index}"), json!({"type": "string"}));
        }
        for index in 0..optional {
            properties.insert(format!("o{index}"), json!({"type": ["string", "null"]}));
        }
        let required: Vec<String> = (0..required).map(|index| format!("r{index}")).collect();
        json!({"type": "object", "properties": properties, "required": required,
            "additionalProperties": false})
    }

    #[test]
    fn optional_properties_and_unions_are_counted_everywhere() {
        let schema = json!({"type": "object", "properties": {
            "a": {"anyOf": [{"$ref": "#/$defs/D"}, {"type": "null"}]},
            "b": {"type": "array", "items": {"type": ["integer", "null"]}}
        }, "required": ["b"], "additionalProperties": false,
        "$defs": {"D": object(1, 2)}});
        assert_eq!(
            Demand::of(&schema),
            Demand {
                optional: 3,
                unions: 4
            }
        );
    }

    #[test]
    fn one_schema_alone_may_use_every_limit_but_not_pass_one() {
        assert!(check_anthropic_limits(&object(3, MAX_UNIONS)).is_ok());
        let err = check_anthropic_limits(&object(0, MAX_UNIONS + 1)).unwrap_err();
        assert_eq!(err.kind, LoweringErrorKind::TooLarge);
        assert_eq!(err.target, LoweringTarget::AnthropicStrict);
        assert_eq!(
            err.problem,
            "the schema has 17 schemas of a union type (`anyOf`, or a list of types such as an \
             `Option`'s); one Anthropic request takes 16 in all its strict tools"
        );
        let mut optional = object(0, 0);
        for index in 0..=MAX_OPTIONAL {
            optional["properties"][format!("o{index}")] = json!({"type": "string"});
        }
        let err = check_anthropic_limits(&optional).unwrap_err();
        assert_eq!(
            err.problem,
            "the schema has 25 optional properties; one Anthropic request takes 24 in all its \
             strict tools"
        );
    }

    #[test]
    fn a_budget_counts_tools_and_refuses_one_that_would_pass_a_limit() {
        let mut budget = AnthropicBudget::default();
        budget.spend(&object(1, 10)).unwrap();
        let err = budget.spend(&object(1, 7)).unwrap_err();
        assert_eq!(
            err.problem,
            "the schema has 7 schemas of a union type (`anyOf`, or a list of types such as an \
             `Option`'s), and the strict tools before it 10; one Anthropic request takes 16 in \
             all its strict tools"
        );
        assert_eq!(
            err.fix,
            "use fewer `Option` and enum fields, or register the tools that most need strict \
             tool use first"
        );
        // The refused tool spent nothing: a smaller one still fits.
        budget.spend(&object(1, 6)).unwrap();
        for _ in 2..MAX_STRICT_TOOLS {
            budget.spend(&object(2, 0)).unwrap();
        }
        let err = budget.spend(&object(1, 0)).unwrap_err();
        assert_eq!(
            err.problem,
            "20 strict tools come before it, as many as one Anthropic request takes"
        );
    }
}
