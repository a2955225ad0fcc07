//! The tools an agent may call, each with its canonical schema and compiled validator.

use std::sync::Arc;

use serde_json::Value;

use crate::ctx::Ctx;
use crate::descriptor::ToolDescriptor;
use crate::error::ToolError;
use crate::provider::lower::{AnthropicBudget, LoweringFallback, LoweringTarget, Lowerings};
use crate::text_args::ReadArgs;
use crate::tool::{Tool, ToolFuture};
use crate::validate::ArgsValidator;

/// A tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools share a wire name.
    #[error("a tool named `{0}` is registered already; give one of them another `name`")]
    DuplicateName(String),
    /// The tool's name breaks `^[a-zA-Z0-9_-]{1,64}$`.
    #[error("`{0}` is not a valid tool name: use 1 to 64 of a-z, A-Z, 0-9, _ and -")]
    InvalidName(String),
    /// A write's idempotency key covers a `#[sensitive]` argument (named in its `key`, or every
    /// argument is in it when it names none): the key is stored and printed, and a sensitive
    /// value in it could be recovered by hashing guesses.
    #[error(
        "the idempotency key of `{tool}` covers its sensitive argument `{argument}`, and a key is stored and printed, so the value could be recovered by hashing guesses: name in `key` only the arguments that identify the operation, without `{argument}`"
    )]
    SensitiveKey {
        /// The tool.
        tool: String,
        /// The sensitive argument in its key.
        argument: String,
    },
    /// The tool's argument schema is not valid JSON Schema 2020-12.
    #[error("the schema of `{tool}` does not compile: {reason}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// The compiler's message.
        reason: String,
    },
}

/// A registered tool: the tool, its canonical schema, its validator, and its schema lowered
/// to the provider dialects that need it.
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: Value,
    validator: ArgsValidator,
    lowerings: Lowerings,
    policy_hash: String,
    /// Its place in the registry, in registration order ([`Registry::at`]).
    slot: usize,
}

impl RegisteredTool {
    /// Its place in its registry ([`Registry::at`]).
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// What the attribute declared.
    pub fn descriptor(&self) -> &'static ToolDescriptor {
        self.tool.descriptor()
    }

    /// The canonical argument schema (JSON Schema 2020-12).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The compiled validator of [`RegisteredTool::schema`].
    pub fn validator(&self) -> &ArgsValidator {
        &self.validator
    }

    /// The tool.
    pub fn tool(&self) -> &dyn Tool {
        &*self.tool
    }

    /// The hash of the tool's policy and schema
    /// ([`policy_hash`](crate::idempotency::policy_hash)), which approvals are bound to.
    pub fn policy_hash(&self) -> &str {
        &self.policy_hash
    }

    /// The schema lowered to each dialect, made when the tool was registered.
    pub(crate) fn lowerings(&self) -> &Lowerings {
        &self.lowerings
    }

    /// [`TextArgs::invoke_text`](crate::text_args::TextArgs::invoke_text) of the tool's reading
    /// of text; `None` for a tool without one.
    pub(crate) fn invoke_text<'a>(&'a self, ctx: &'a Ctx, text: &'a str) -> Option<ToolFuture<'a>> {
        self.tool.text_args()?.invoke_text(ctx, text)
    }

    /// [`TextArgs::read_args`](crate::text_args::TextArgs::read_args) of the tool's reading of
    /// text; `None` for a tool without one.
    pub(crate) fn read_args(&self, text: &str) -> Option<ReadArgs> {
        self.tool.text_args()?.read_args(text)
    }

    /// [`TextArgs::invoke_args`](crate::text_args::TextArgs::invoke_args) of the tool's reading
    /// of text, on what its `read_args` read.
    pub(crate) fn invoke_args<'a>(&'a self, ctx: &'a Ctx, args: ReadArgs) -> ToolFuture<'a> {
        match self.tool.text_args() {
            Some(text_args) => text_args.invoke_args(ctx, args),
            // Only what `read_args` read comes here, and a tool without a reading reads none.
            None => Box::pin(std::future::ready(Err(ToolError::internal(format!(
                "{} was handed arguments it did not read",
                self.descriptor().name
            ))))),
        }
    }
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.descriptor().name)
            .finish_non_exhaustive()
    }
}

/// The tools an agent may call, in registration order.
///
/// Registering a tool compiles its validator and lowers its schema, once, to the dialects that
/// cannot take the canonical schema (OpenAI strict mode, Anthropic strict tool use, Gemini
/// `parameters`); every catalog reuses them. A tool whose schema does not lower to one of them
/// is still registered: it is listed in [`Registry::lowering_fallbacks`] and logged once, as a
/// `tracing` warning. So is a tool that would take an Anthropic catalog past the limits of one
/// request on strict tools, counted over the tools registered before it.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Look up an order by its id.
/// #[tool(permission = "orders:read")]
/// async fn get_order(order_id: String) -> Result<String, ToolError> {
///     Ok(order_id)
/// }
///
/// let mut registry = Registry::new();
/// registry.register::<get_order>()?;
/// assert_eq!(registry.get("get_order").unwrap().descriptor().permission, Some("orders:read"));
/// # Ok::<(), toolgate::tool::RegistryError>(())
/// ```
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<RegisteredTool>,
    /// `(name, index)` sorted by name: a binary search over a few short names beats hashing.
    by_name: Vec<(&'static str, usize)>,
    fallbacks: Vec<LoweringFallback>,
    /// What the tools declared strict in an Anthropic catalog use of one request's limits.
    anthropic_budget: AnthropicBudget,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers the tool type `#[tool]` generated for a fn of the same name.
    pub fn register<T: Tool + Default>(&mut self) -> Result<&mut Self, RegistryError> {
        self.register_tool(T::default())
    }

    /// Registers a tool value.
    pub fn register_tool(&mut self, tool: impl Tool) -> Result<&mut Self, RegistryError> {
        self.register_shared(Arc::new(tool))
    }

    /// The work of [`Registry::register_tool`], once for every tool type rather than once per
    /// type: the generic entry points only box the tool.
    fn register_shared(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self, RegistryError> {
        let name = tool.descriptor().name;
        if !is_valid_name(name) {
            return Err(RegistryError::InvalidName(name.to_owned()));
        }
        let descriptor = tool.descriptor();
        if let Some(argument) = descriptor.sensitive.iter().find(|argument| {
            !descriptor.side_effect.is_read()
                && (descriptor.key.is_empty() || descriptor.key.contains(argument))
        }) {
            return Err(RegistryError::SensitiveKey {
                tool: name.to_owned(),
                argument: (*argument).to_owned(),
            });
        }
        let slot = match self.by_name.binary_search_by(|(known, _)| known.cmp(&name)) {
            Ok(_) => return Err(RegistryError::DuplicateName(name.to_owned())),
            Err(slot) => slot,
        };
        let schema = tool.args_schema();
        let validator =
            ArgsValidator::new(&schema).map_err(|err| RegistryError::InvalidSchema {
                tool: name.to_owned(),
                reason: err.to_string(),
            })?;
        let mut lowerings = Lowerings::of(&schema);
        lowerings.spend(&mut self.anthropic_budget);
        for fallback in lowerings.fallbacks(name) {
            tracing::warn!(
                tool = name,
                error = %fallback.error,
                "the tool's schema does not lower to {}; catalogs declare it {}",
                fallback.error.target,
                fallback.declared(),
            );
            self.fallbacks.push(fallback);
        }
        self.by_name.insert(slot, (name, self.tools.len()));
        let policy_hash = crate::idempotency::policy_hash(tool.descriptor(), &schema);
        self.tools.push(RegisteredTool {
            tool,
            schema,
            validator,
            lowerings,
            policy_hash,
            slot: self.tools.len(),
        });
        Ok(self)
    }

    /// Every tool whose schema does not lower to a dialect, found when it was registered, in
    /// registration order: a catalog in that dialect declares it with its canonical schema.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use toolgate::prelude::*;
    /// use toolgate::provider::LoweringTarget;
    ///
    /// /// Tag an order.
    /// #[tool(permission = "orders:write")]
    /// async fn tag_order(tags: HashMap<String, String>) -> Result<String, ToolError> {
    ///     Ok(format!("{} tags", tags.len()))
    /// }
    ///
    /// let mut registry = Registry::new();
    /// registry.register::<tag_order>()?;
    /// let fallback = &registry.lowering_fallbacks()[0];
    /// assert_eq!(fallback.tool, "tag_order");
    /// assert_eq!(fallback.error.target, LoweringTarget::OpenAiStrict);
    /// assert!(fallback.error.fix.contains("Vec of structs"));
    /// # Ok::<(), toolgate::tool::RegistryError>(())
    /// ```
    pub fn lowering_fallbacks(&self) -> &[LoweringFallback] {
        &self.fallbacks
    }

    /// The tools declared with `"strict": false` in OpenAI strict mode or in Anthropic strict
    /// tool use, and why: the [`Registry::lowering_fallbacks`] of those two dialects, each
    /// naming its dialect in `error.target`.
    pub fn strict_fallbacks(&self) -> impl Iterator<Item = &LoweringFallback> {
        self.fallbacks.iter().filter(|fallback| {
            matches!(
                fallback.error.target,
                LoweringTarget::OpenAiStrict | LoweringTarget::AnthropicStrict
            )
        })
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name
            .binary_search_by(|(known, _)| (*known).cmp(name))
            .ok()
            .map(|slot| &self.tools[self.by_name[slot].1])
    }

    /// The tool at `slot` ([`RegisteredTool::slot`]): a tool found once, found again without
    /// comparing names.
    pub(crate) fn at(&self, slot: usize) -> &RegisteredTool {
        &self.tools[slot]
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter()
    }

    /// The wire names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tools.iter().map(|tool| tool.descriptor().name)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the rule every provider shares.
pub(crate) fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use serde_json::json;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;
    use crate::SideEffect;
    use crate::ctx::Ctx;
    use crate::provider::{FORMAT_NAMES, LoweringErrorKind, format_by_name};
    use crate::tool::ToolFuture;

    /// A tool with a fixed descriptor and schema; it is never called.
    struct Declared {
        descriptor: &'static ToolDescriptor,
        schema: Value,
    }

    impl Tool for Declared {
        fn descriptor(&self) -> &'static ToolDescriptor {
            self.descriptor
        }

        fn args_schema(&self) -> Value {
            self.schema.clone()
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, _args: &'a Value) -> ToolFuture<'a> {
            Box::pin(async {
                Ok(crate::tool::JsonText::of(&Value::Null).expect("null serializes"))
            })
        }
    }

    static WEATHER: ToolDescriptor = ToolDescriptor::new("get_weather", "Current weather.");
    static TAG: ToolDescriptor = ToolDescriptor::new("tag_order", "Tag an order.");
    static VERBOSE: ToolDescriptor = ToolDescriptor::new("search", "Search the orders.");

    static PIN_IN_KEY: ToolDescriptor = ToolDescriptor::new("set_pin", "Set a PIN.")
        .with_side_effect(SideEffect::Write)
        .with_key(&["card_id", "pin"])
        .with_sensitive(&["pin"]);
    static PIN_IN_EVERY_ARGUMENT: ToolDescriptor = ToolDescriptor::new("set_pin", "Set a PIN.")
        .with_side_effect(SideEffect::Write)
        .with_sensitive(&["pin"]);
    static PIN_OUT_OF_KEY: ToolDescriptor = ToolDescriptor::new("set_pin", "Set a PIN.")
        .with_side_effect(SideEffect::Write)
        .with_key(&["card_id"])
        .with_sensitive(&["pin"]);
    static PIN_READ: ToolDescriptor =
        ToolDescriptor::new("check_pin", "Check a PIN.").with_sensitive(&["pin"]);

    /// A write whose key covers a sensitive argument is refused, named in `key` or as one of
    /// every argument; a key without it, and a read (which has no key), are registered.
    #[test]
    fn a_key_never_covers_a_sensitive_argument() {
        let pin = |descriptor| Declared {
            descriptor,
            schema: json!({"type": "object", "properties": {"card_id": {"type": "string"},
                "pin": {"type": "string"}}, "required": ["card_id", "pin"],
                "additionalProperties": false}),
        };
        for refused in [&PIN_IN_KEY, &PIN_IN_EVERY_ARGUMENT] {
            let err = Registry::new().register_tool(pin(refused)).err();
            assert_eq!(
                err,
                Some(RegistryError::SensitiveKey {
                    tool: "set_pin".into(),
                    argument: "pin".into()
                })
            );
        }
        for admitted in [&PIN_OUT_OF_KEY, &PIN_READ] {
            assert!(Registry::new().register_tool(pin(admitted)).is_ok());
        }
    }

    fn weather() -> Declared {
        Declared {
            descriptor: &WEATHER,
            schema: json!({"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}),
        }
    }

    /// A map: neither strict mode nor Gemini can declare it.
    fn tag() -> Declared {
        Declared {
            descriptor: &TAG,
            schema: json!({"type": "object", "properties": {"tags": {"type": "object",
                "additionalProperties": {"type": "string"}}}, "required": ["tags"],
                "additionalProperties": false}),
        }
    }

    /// A `#[serde(default)]` flag: Gemini and Anthropic take it, OpenAI strict mode does not.
    fn verbose() -> Declared {
        Declared {
            descriptor: &VERBOSE,
            schema: json!({"type": "object", "properties": {"verbose": {"type": "boolean",
                "default": false}}, "additionalProperties": false}),
        }
    }

    fn registry() -> Registry {
        let mut registry = Registry::new();
        registry
            .register_tool(weather())
            .unwrap()
            .register_tool(tag())
            .unwrap()
            .register_tool(verbose())
            .unwrap();
        registry
    }

    #[test]
    fn every_tool_that_does_not_lower_is_listed_with_its_dialect_and_reason() {
        let registry = registry();
        let listed: Vec<_> = registry
            .lowering_fallbacks()
            .iter()
            .map(|fallback| {
                let error = &fallback.error;
                (
                    fallback.tool,
                    error.target,
                    error.kind,
                    error.pointer.as_str(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                (
                    "tag_order",
                    LoweringTarget::OpenAiStrict,
                    LoweringErrorKind::OpenObject,
                    "/properties/tags/additionalProperties"
                ),
                (
                    "tag_order",
                    LoweringTarget::AnthropicStrict,
                    LoweringErrorKind::OpenObject,
                    "/properties/tags/additionalProperties"
                ),
                (
                    "tag_order",
                    LoweringTarget::Gemini,
                    LoweringErrorKind::OpenObject,
                    "/properties/tags/additionalProperties"
                ),
                (
                    "search",
                    LoweringTarget::OpenAiStrict,
                    LoweringErrorKind::OptionalNotNullable,
                    "/properties/verbose"
                ),
            ]
        );
        let strict: Vec<_> = registry.strict_fallbacks().map(|f| f.tool).collect();
        assert_eq!(strict, ["tag_order", "tag_order", "search"]);
        assert_eq!(
            registry.lowering_fallbacks()[3].to_string(),
            "`search` is declared without strict mode: cannot lower the schema at \
             #/properties/verbose to OpenAI strict mode: `verbose` is optional but rejects null, \
             and strict mode makes the model send null for a value it leaves out; make the field \
             `Option<T>` (instead of `#[serde(default)]`) to use strict mode"
        );
        // A tool that cannot be registered leaves no fallback behind.
        let mut registry = Registry::new();
        registry.register_tool(tag()).unwrap();
        assert!(registry.register_tool(tag()).is_err());
        assert_eq!(registry.lowering_fallbacks().len(), 3);
    }

    #[test]
    fn an_anthropic_catalog_is_strict_only_within_the_limits_of_one_request() {
        let mut registry = Registry::new();
        for index in 0..=20 {
            let name: &'static str = Box::leak(format!("tool_{index}").into_boxed_str());
            let descriptor = Box::leak(Box::new(ToolDescriptor::new(name, "A tool.")));
            let tool = Declared {
                descriptor,
                schema: weather().schema,
            };
            registry.register_tool(tool).unwrap();
        }
        let fallbacks: Vec<_> = registry.strict_fallbacks().collect();
        assert_eq!(fallbacks.len(), 1);
        assert_eq!(fallbacks[0].tool, "tool_20");
        assert_eq!(fallbacks[0].error.kind, LoweringErrorKind::TooLarge);
        assert_eq!(
            fallbacks[0].to_string(),
            "`tool_20` is declared without strict mode: cannot lower the schema at # to \
             Anthropic strict tool use: 20 strict tools come before it, as many as one \
             Anthropic request takes; register the tools that most need strict tool use first"
        );
        let anthropic = format_by_name("anthropic-strict")
            .unwrap()
            .catalog(&registry);
        assert!(anthropic[..20].iter().all(|tool| tool["strict"] == true));
        assert_eq!(anthropic[20]["strict"], false);
        assert_eq!(anthropic[20]["input_schema"], weather().schema);
        // OpenAI's limits are per schema: every tool is strict there.
        let openai = format_by_name("openai-strict").unwrap().catalog(&registry);
        assert!(openai.iter().all(|tool| tool["function"]["strict"] == true));
    }

    #[test]
    fn catalogs_declare_the_lowerings_made_at_registration() {
        let mut registry = registry();
        // Swap the lowering kept for `get_weather` for that of another schema: a catalog that
        // lowered again would show the tool's own schema, not this one.
        let other = json!({"type": "object", "properties": {"town": {"type": "string"}},
            "required": ["town"], "additionalProperties": false});
        registry.tools[0].lowerings = Lowerings::of(&other);
        let strict = format_by_name("openai-strict").unwrap().catalog(&registry);
        assert_eq!(
            strict[0]["function"]["parameters"]["properties"],
            json!({"town": {"type": "string"}})
        );
        let gemini = format_by_name("gemini").unwrap().catalog(&registry);
        assert_eq!(
            gemini[0]["parameters"]["properties"],
            json!({"town": {"type": "string"}})
        );
        // The tools that fell back are declared with their canonical schema.
        assert_eq!(strict[2]["function"]["strict"], false);
        assert_eq!(strict[2]["function"]["parameters"], verbose().schema);
        assert_eq!(gemini[1]["parametersJsonSchema"], tag().schema);
    }

    /// The warning events a subscriber saw, each as its message and `tool` field.
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<String>>>);

    impl Warnings {
        fn seen(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    struct Fields(Vec<String>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if matches!(field.name(), "tool" | "message") {
                self.0.push(format!("{value:?}"));
            }
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            if matches!(field.name(), "tool" | "message") {
                self.0.push(value.to_owned());
            }
        }
    }

    struct Recorder {
        warnings: Warnings,
        next_id: AtomicU64,
    }

    impl Subscriber for Recorder {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }

        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed))
        }

        fn record(&self, _: &Id, _: &Record<'_>) {}

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, event: &Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                let mut fields = Fields(Vec::new());
                event.record(&mut fields);
                self.warnings.0.lock().unwrap().push(fields.0.join(": "));
            }
        }

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn each_fallback_is_logged_once_at_registration_and_never_by_a_catalog() {
        let warnings = Warnings::default();
        let recorder = Recorder {
            warnings: warnings.clone(),
            next_id: AtomicU64::new(1),
        };
        tracing::subscriber::with_default(recorder, || {
            // Other tests hit the same callsites on other threads, with no subscriber: make
            // sure the interest each callsite cached counts this one.
            tracing::callsite::rebuild_interest_cache();
            let registry = registry();
            assert_eq!(
                warnings.seen(),
                [
                    "the tool's schema does not lower to OpenAI strict mode; catalogs declare it \
                     without strict mode: tag_order",
                    "the tool's schema does not lower to Anthropic strict tool use; catalogs \
                     declare it without strict mode: tag_order",
                    "the tool's schema does not lower to Gemini parameters; catalogs declare it \
                     with parametersJsonSchema: tag_order",
                    "the tool's schema does not lower to OpenAI strict mode; catalogs declare it \
                     without strict mode: search",
                ]
            );
            for _ in 0..2 {
                for name in FORMAT_NAMES {
                    let catalog = format_by_name(name).unwrap().catalog(&registry);
                    assert_eq!(catalog.len(), 3, "{name}");
                }
            }
            assert_eq!(warnings.seen().len(), 4, "{:?}", warnings.seen());
        });
    }
}
