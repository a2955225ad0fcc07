//! The client's W3C trace context (`traceparent`, `tracestate`, as a request's `_meta` carries
//! them) read as an OpenTelemetry span context, and made the remote parent of a request's span
//! (feature `otel`).
//!
//! Read by hand, as the W3C Trace Context recommendation says, rather than with the SDK's
//! propagator: the library then depends on the OpenTelemetry API alone.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Makes the span context `traceparent` names (with `tracestate`'s entries) the parent of
/// `span`, which is not entered yet, and links the span current now to it. `false` when
/// `traceparent` is not valid ([`remote_parent`]), or the subscriber has no
/// `tracing-opentelemetry` layer to take a parent.
pub(crate) fn set_remote_parent(span: &Span, traceparent: &str, tracestate: Option<&str>) -> bool {
    let Some(parent) = remote_parent(traceparent, tracestate) else {
        return false;
    };
    let context = opentelemetry::Context::new().with_remote_span_context(parent);
    if span.set_parent(context).is_err() {
        return false;
    }
    // The conventions link the context the request arrived in (the transport's span, say).
    let ambient = Span::current().context().span().span_context().clone();
    span.add_link(ambient);
    true
}

/// The remote span context a W3C `traceparent` names, with the entries of `tracestate` (dropped
/// when it does not parse), or `None` when `traceparent` is not valid: version `00` is exactly
/// `00-{trace id}-{parent id}-{flags}` in lowercase hex (32, 16 and 2 digits), neither id all
/// zeros; a later version (never `ff`) may carry more fields after the flags, which are
/// ignored. Of the flags, only `sampled` is kept.
pub(crate) fn remote_parent(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut fields = traceparent.trim().split('-');
    let version = fields
        .next()
        .filter(|field| is_hex(field, 2) && *field != "ff")?;
    let trace_id = fields.next().filter(|field| is_hex(field, 32))?;
    let span_id = fields.next().filter(|field| is_hex(field, 16))?;
    let flags = fields.next().filter(|field| is_hex(field, 2))?;
    if version == "00" && fields.next().is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()? & TraceFlags::SAMPLED.to_u8();
    let state = tracestate
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    let parent = SpanContext::new(trace_id, span_id, TraceFlags::new(flags), true, state);
    parent.is_valid().then_some(parent)
}

/// Whether `field` is `digits` lowercase hex digits.
fn is_hex(field: &str, digits: usize) -> bool {
    field.len() == digits
        && field
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";

    /// A parent's trace id, span id and sampled flag.
    type Parent<'a> = Option<(&'a str, &'a str, bool)>;

    #[test]
    fn valid_traceparents_name_a_remote_parent_and_others_none() {
        // (traceparent, the parent's trace id, span id and sampled flag, or None)
        let cases: [(String, Parent<'_>); 14] = [
            (
                format!("00-{TRACE}-{PARENT}-01"),
                Some((TRACE, PARENT, true)),
            ),
            (
                format!("00-{TRACE}-{PARENT}-00"),
                Some((TRACE, PARENT, false)),
            ),
            // Unknown flags are ignored.
            (
                format!("00-{TRACE}-{PARENT}-ff"),
                Some((TRACE, PARENT, true)),
            ),
            (
                format!(" 00-{TRACE}-{PARENT}-01 "),
                Some((TRACE, PARENT, true)),
            ),
            // A later version may carry more.
            (
                format!("01-{TRACE}-{PARENT}-01-more"),
                Some((TRACE, PARENT, true)),
            ),
            (format!("00-{TRACE}-{PARENT}-01-more"), None),
            (format!("ff-{TRACE}-{PARENT}-01"), None),
            (format!("00-{}-{PARENT}-01", TRACE.to_uppercase()), None),
            (format!("00-{}-{PARENT}-01", "0".repeat(32)), None),
            (format!("00-{TRACE}-{}-01", "0".repeat(16)), None),
            (format!("00-{}-{PARENT}-01", &TRACE[1..]), None),
            (format!("00-{TRACE}-{PARENT}-1"), None),
            (format!("00-{TRACE}-{PARENT}"), None),
            ("not a traceparent".to_owned(), None),
        ];
        for (traceparent, expected) in cases {
            let parent = remote_parent(&traceparent, None);
            let seen = parent.as_ref().map(|parent| {
                (
                    parent.trace_id().to_string(),
                    parent.span_id().to_string(),
                    parent.is_sampled(),
                )
            });
            let expected =
                expected.map(|(trace, span, sampled)| (trace.to_owned(), span.to_owned(), sampled));
            assert_eq!(seen, expected, "{traceparent}");
            if let Some(parent) = parent {
                assert!(parent.is_remote(), "{traceparent}");
            }
        }
    }

    #[test]
    fn tracestate_is_kept_with_the_parent_or_dropped_when_it_does_not_parse() {
        let traceparent = format!("00-{TRACE}-{PARENT}-01");
        let parent = remote_parent(
            &traceparent,
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        )
        .unwrap();
        assert_eq!(parent.trace_state().get("congo"), Some("t61rcWkgMzE"));
        assert_eq!(parent.trace_state().get("rojo"), Some(PARENT));
        let parent = remote_parent(&traceparent, Some("congo")).unwrap();
        assert_eq!(parent.trace_state().header(), "");
        assert_eq!(parent.span_id().to_string(), PARENT);
    }
}
