//! Lowering of the canonical schema (JSON Schema 2020-12, as schemars writes it) into the
//! dialects that cannot take it as it is: OpenAI strict mode ([`openai_strict`]), Anthropic
//! strict tool use ([`anthropic_strict`]) and Gemini's OpenAPI 3.0 subset ([`gemini`]).
//!
//! Lowering keeps what the arguments mean. A keyword the target lacks is dropped only when that is
//! safe: an annotation, or a bound the validator still enforces on the canonical schema, so the
//! worst case is an argument the validator rejects with a message the model can act on. A keyword
//! whose loss would tell the model a different shape (an intersection, a map, a tuple, a
//! condition) is a [`LoweringError`] that names the schema and what to change in the Rust type.
//!
//! Every dialect shares one walk over the schema (`lowerer`): each schema is normalized
//! (`normalize`: a one-entry `allOf` merged, a `$ref` inlined where the dialect wants it),
//! checked for what no dialect can say (`structural`), and its subschemas lowered in turn; a
//! dialect (`strict`, `gemini`) decides only what differs. The two strict dialects share one
//! dialect too, and differ only in their subset (`strict` for OpenAI's, `anthropic_strict` for
//! Anthropic's, with the limits of each: `strict_limits`, `anthropic_limits`). A registered tool
//! keeps its lowerings (`registered`), made once when it is registered.

mod anthropic_grammar;
mod anthropic_limits;
mod anthropic_strict;
mod error;
#[cfg(test)]
mod fixtures;
mod gemini;
mod lowerer;
mod normalize;
mod nullable;
mod registered;
mod strict;
mod strict_limits;
mod structural;

pub(crate) use anthropic_limits::AnthropicBudget;
pub use anthropic_strict::anthropic_strict;
pub use error::{LoweringError, LoweringErrorKind, LoweringTarget};
pub use gemini::gemini;
pub use registered::LoweringFallback;
pub(crate) use registered::Lowerings;
pub use strict::openai_strict;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, anthropic_strict, gemini, openai_strict};
    use crate::schema::canonical_schema_for;

    #[test]
    fn the_documented_example_lowers_exactly() {
        let canonical = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
            "required": ["city"],
            "additionalProperties": false
        });
        assert_eq!(
            openai_strict(&canonical).unwrap(),
            json!({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"]}},
                "required":["city","unit"],"additionalProperties":false})
        );
        assert_eq!(
            gemini(&canonical).unwrap(),
            json!({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","nullable":true}},"required":["city"]})
        );
    }

    #[test]
    fn the_root_must_be_an_object() {
        for schema in [
            json!({"type": "string"}),
            json!(true),
            json!(["type"]),
            json!({"oneOf": [{"type": "object", "properties": {}}, {"type": "string"}]}),
            json!({"type": ["object", "null"], "properties": {}}),
            canonical_schema_for::<Shape>(),
        ] {
            assert_eq!(
                refused(openai_strict(&schema)).kind,
                LoweringErrorKind::RootNotObject,
                "{schema}"
            );
            assert_eq!(
                refused(gemini(&schema)).kind,
                LoweringErrorKind::RootNotObject,
                "{schema}"
            );
            assert_eq!(
                refused(anthropic_strict(&schema)).kind,
                LoweringErrorKind::RootNotObject,
                "{schema}"
            );
        }
        // A root reference is inlined.
        let referenced = json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}});
        assert_strict(&openai_strict(&referenced).unwrap());
        assert_anthropic_strict(&anthropic_strict(&referenced).unwrap());
        assert_gemini(&gemini(&referenced).unwrap());
        // A root that says nothing of its keys is a tool without arguments.
        assert_eq!(
            openai_strict(&json!({"type": "object"})).unwrap(),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
    }

    #[test]
    fn every_lowering_of_every_test_type_is_valid_json_schema() {
        let schemas = [
            canonical_schema_for::<Order>(),
            canonical_schema_for::<Address>(),
            canonical_schema_for::<Tree>(),
            canonical_schema_for::<WithDefault>(),
            canonical_schema_for::<Line>(),
        ];
        for schema in &schemas {
            if let Ok(strict) = openai_strict(schema) {
                assert_strict(&strict);
            }
            if let Ok(lowered) = anthropic_strict(schema) {
                assert_anthropic_strict(&lowered);
            }
            if let Ok(lowered) = gemini(schema) {
                assert_gemini(&lowered);
            }
        }
    }
}
