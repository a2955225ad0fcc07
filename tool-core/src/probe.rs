//! How the code `#[tool]` generates reaches the schema and the deserializer of a tool's arguments
//! without piling up errors when an argument type is unfit.
//!
//! A type that lacks `Deserialize` or `JsonSchema` would otherwise fail in every place that needs
//! it (serde's derive alone reports it three times). Instead the generated code goes through
//! [`Probe`], whose methods resolve by autoref: to the real implementation when the type fits,
//! and otherwise to a stand-in that compiles. The one error the user sees comes from
//! [`assert_argument`], spanned on the argument's type, with a message that says what to derive.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ToolError;

/// A zero-sized handle on the type `T` whose methods are chosen by autoref: call them as
/// `(&Probe::<T>::new()).method()` with [`ProbeArgs`] in scope.
pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    /// The probe of `T`.
    pub const fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Probe::new()
    }
}

/// What the generated code asks of an arguments type. Implemented on `Probe<T>` when `T` fits,
/// and on `&Probe<T>` for every `T`, so that method resolution picks the first when it applies.
pub trait ProbeArgs<T> {
    /// [`Fits`] when `T` can be a tool's arguments, [`DoesNotFit`] otherwise.
    type Verdict;

    /// The verdict, for [`assert_argument`].
    fn verdict(&self) -> Self::Verdict;

    /// The canonical JSON schema of `T`.
    fn schema(&self) -> Value;

    /// `T` from arguments that passed validation, read from the tree.
    fn parse(&self, tool: &str, args: &Value) -> Result<T, ToolError>;

    /// `T` from arguments that passed validation, written out as text and read as
    /// [`parse_text`](Self::parse_text) reads: for a tool that reads text anyway, so that `T`
    /// has one deserializer.
    fn parse_via_text(&self, tool: &str, args: &Value) -> Result<T, ToolError>;

    /// `T` straight from JSON text, or `None` if serde refuses it.
    fn parse_text(&self, text: &str) -> Option<T>;
}

/// The verdict on a type that can be a tool argument.
pub struct Fits;

/// The verdict on a type that cannot; [`assert_argument`] turns it into the error.
pub struct DoesNotFit;

impl<T: DeserializeOwned + JsonSchema> ProbeArgs<T> for Probe<T> {
    type Verdict = Fits;

    fn verdict(&self) -> Fits {
        Fits
    }

    fn schema(&self) -> Value {
        crate::schema::canonical_schema_for::<T>()
    }

    fn parse(&self, tool: &str, args: &Value) -> Result<T, ToolError> {
        crate::__private::deserialize_args(tool, args)
    }

    fn parse_via_text(&self, tool: &str, args: &Value) -> Result<T, ToolError> {
        crate::__private::deserialize_args_via_text(tool, args)
    }

    fn parse_text(&self, text: &str) -> Option<T> {
        serde_json::from_str(text).ok()
    }
}

impl<T> ProbeArgs<T> for &Probe<T> {
    type Verdict = DoesNotFit;

    fn verdict(&self) -> DoesNotFit {
        DoesNotFit
    }

    fn schema(&self) -> Value {
        let () = Unfit::<T>::NEVER;
        Value::Null
    }

    fn parse(&self, _tool: &str, _args: &Value) -> Result<T, ToolError> {
        let () = Unfit::<T>::NEVER;
        Err(ToolError::internal("unreachable"))
    }

    fn parse_via_text(&self, _tool: &str, _args: &Value) -> Result<T, ToolError> {
        let () = Unfit::<T>::NEVER;
        Err(ToolError::internal("unreachable"))
    }

    fn parse_text(&self, _text: &str) -> Option<T> {
        let () = Unfit::<T>::NEVER;
        None
    }
}

/// Stops the build if the stand-in is ever compiled into a program. It cannot be: the stand-in is
/// chosen only for a type that fails [`assert_argument`], which is a type error, and a crate with a
/// type error is never built. This guards the reasoning, not the user.
struct Unfit<T>(PhantomData<T>);

impl<T> Unfit<T> {
    const NEVER: () = panic!(
        "toolgate: a #[tool] argument type does not implement `Deserialize` and `JsonSchema`; please report this as a bug in #[tool]"
    );
}

/// Implemented only for [`Fits`]: an argument of type `A` is deserialized from the model's JSON
/// and described in the schema.
#[diagnostic::on_unimplemented(
    message = "`{A}` cannot be a tool argument: it must implement `serde::Deserialize` and `schemars::JsonSchema`",
    label = "not a type the model can send",
    note = "add `#[derive(serde::Deserialize, schemars::JsonSchema)]` to the type, or take one that has both (String, a number, bool, Vec, Option, a map)"
)]
pub trait ArgumentFits<A> {}

impl<A> ArgumentFits<A> for Fits {}

/// Compile-time check, spanned on an argument's type, that it fits: pass it
/// `(&Probe::<A>::new()).verdict()`.
pub fn assert_argument<A, V: ArgumentFits<A>>(_verdict: V) {}

/// Whether an argument's type is one for which serde accepts exactly the JSON values its
/// canonical schema accepts, so that text serde reads needs no schema validation (see
/// [`TextArgs`](crate::text_args::TextArgs)). Implemented on `Probe<T>` for `T:`
/// [`ExactArg`], and on `&Probe<T>` for every `T`, answering `false`.
pub trait ProbeExact {
    /// The answer.
    fn exact(&self) -> bool;
}

impl<T: ExactArg> ProbeExact for Probe<T> {
    fn exact(&self) -> bool {
        true
    }
}

impl<T> ProbeExact for &Probe<T> {
    fn exact(&self) -> bool {
        false
    }
}

/// A type whose `Deserialize`, fed JSON, accepts exactly the values its canonical schema
/// accepts, and which it refuses only where the validated path also fails or reads a different
/// JSON value (such as `3.0` for an integer, which the validated path reads as `3`).
///
/// The schemas, after [`canonical_schema_for`](crate::schema::canonical_schema_for):
/// - `String`: `{"type": "string"}`, and serde takes every JSON string and nothing else.
/// - `bool`: `{"type": "boolean"}`, likewise.
/// - each integer type: `{"type": "integer"}` with the type's own `minimum` and `maximum`, and
///   serde takes exactly the JSON integers in that range (never a float such as `3.0`).
/// - `f64`: `{"type": "number"}`, and serde takes every JSON number.
///
/// [`ExactArg`] adds `Option<T>` (the schema allows `null` and leaves the property out of
/// `required`; serde reads `null` or a missing field as `None`) and `Vec<T>` (an array of `T`),
/// for `T: ExactScalar`.
pub trait ExactScalar {}

/// An argument type that [`ProbeExact`] answers `true` for: an [`ExactScalar`], or an `Option`
/// or `Vec` of one.
pub trait ExactArg {}

macro_rules! exact_scalars {
    ($($ty:ty),*) => {
        $(impl ExactScalar for $ty {})*
    };
}

exact_scalars!(
    String, bool, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f64
);

impl<T: ExactScalar> ExactArg for T {}
impl<T: ExactScalar> ExactArg for Option<T> {}
impl<T: ExactScalar> ExactArg for Vec<T> {}
