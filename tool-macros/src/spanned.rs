//! A value read from the attribute, with where it was written.

use proc_macro2::Span;

/// A value with the span of the tokens it came from (`span`) and of the key that introduced it
/// (`key`): errors about the value land on the value, errors about the key's place on the key.
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
    pub(crate) key: Span,
}

impl<T> Spanned<T> {
    /// `value`, written at `span`; the key's span is set when the key is stored.
    pub(crate) fn new(value: T, span: Span) -> Self {
        Spanned {
            value,
            span,
            key: span,
        }
    }
}
