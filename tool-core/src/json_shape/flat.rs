//! The common case of [`shape_of`](super::shape_of), checked in one pass over the bytes: an
//! object of a few keys, whose keys and values hold no escape and whose values are strings,
//! `true`, `false`, `null` or plain numbers. Most calls' arguments are such an object.
//!
//! What this check accepts, the full reading accepts too, as an object; anything else (an
//! escape, a control character, a nested value, an exponent, a long number, a key given twice,
//! more than a few keys, text that is not JSON) is left to the full reading, which says what is
//! wrong with it.

/// The most keys compared one by one; an object with more is left to the full reading.
const FEW: usize = 8;

/// The most digits of a number checked here: far within what an `f64` holds, so that no number
/// accepted here is one that cannot be read.
const DIGITS: usize = 15;

/// Whether `text` is one such object, with nothing but JSON whitespace around it.
pub(super) fn is_flat_object(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return false;
    }
    at = skip_space(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return skip_space(bytes, at + 1) == bytes.len();
    }
    let mut keys: [&[u8]; FEW] = [&[]; FEW];
    let mut count = 0;
    loop {
        let Some((key, after)) = plain_string(bytes, at) else {
            return false;
        };
        // Without escapes, two keys are the same key exactly when their bytes are.
        if count == FEW || keys[..count].contains(&key) {
            return false;
        }
        keys[count] = key;
        count += 1;
        at = skip_space(bytes, after);
        if bytes.get(at) != Some(&b':') {
            return false;
        }
        let Some(after) = plain_value(bytes, skip_space(bytes, at + 1)) else {
            return false;
        };
        at = skip_space(bytes, after);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') => return skip_space(bytes, at + 1) == bytes.len(),
            _ => return false,
        }
    }
}

/// The place of the first byte from `at` that is not JSON whitespace.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The string at `at`, if it has no escape and no control character: its bytes between the
/// quotes, and the place after it.
fn plain_string(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let start = at + 1;
    let mut end = start;
    loop {
        match *bytes.get(end)? {
            b'"' => return Some((&bytes[start..end], end + 1)),
            b'\\' | 0x00..=0x1f => return None,
            _ => end += 1,
        }
    }
}

/// The place after the string, `true`, `false`, `null` or plain number at `at`.
fn plain_value(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => plain_string(bytes, at).map(|(_, after)| after),
        b't' => word(bytes, at, b"true"),
        b'f' => word(bytes, at, b"false"),
        b'n' => word(bytes, at, b"null"),
        b'-' | b'0'..=b'9' => plain_number(bytes, at),
        _ => None,
    }
}

/// The place after `literal`, if it is at `at`.
fn word(bytes: &[u8], at: usize, literal: &[u8]) -> Option<usize> {
    let end = at + literal.len();
    (bytes.get(at..end)? == literal).then_some(end)
}

/// The place after the number at `at`, if it is `-?(0|[1-9][0-9]*)(\.[0-9]+)?` of at most
/// [`DIGITS`] digits.
fn plain_number(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits = |from: usize| {
        bytes.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    let whole = digits(at);
    if whole == 0 || (whole > 1 && bytes[at] == b'0') {
        return None;
    }
    at += whole;
    let mut count = whole;
    if bytes.get(at) == Some(&b'.') {
        let fraction = digits(at + 1);
        if fraction == 0 {
            return None;
        }
        at += 1 + fraction;
        count += fraction;
    }
    // An exponent, or more digits than are checked here: left to the full reading.
    if count > DIGITS || matches!(bytes.get(at), Some(b'e' | b'E')) {
        return None;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::super::{Shape, read_shape};
    use super::*;

    #[test]
    fn the_common_arguments_are_checked_here() {
        for text in [
            r#"{"order_id":"ORD-1001"}"#,
            r#" { "a" : 1 , "b":-2.5,"c":true,"d":false,"e":null,"f":"é €😀","g":0,"h":-0.0 } "#,
            "{}",
            " {\n\t}\r ",
            r#"{"a":123456789012345}"#,
        ] {
            assert!(is_flat_object(text), "{text}");
            assert_eq!(read_shape(text), Ok(Shape::Object), "{text}");
        }
    }

    #[test]
    fn what_is_not_plain_is_left_to_the_full_reading() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1e5}"#,
            r#"{"a":1E5}"#,
            r#"{"a":"\n"}"#,
            r#"{"\u0061":1}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":.5}"#,
            r#"{"a":1,}"#,
            r#"{"a":1}x"#,
            r#"{"a":[1]}"#,
            r#"{"a":{}}"#,
            r#"{"a":1234567890123456}"#,
            r#"{"a":tru}"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"[1]"#,
            r#""x""#,
            "",
            "{",
            r#"{"a":1"#,
            r#"{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}"#,
        ] {
            assert!(!is_flat_object(text), "{text}");
        }
    }

    #[test]
    fn whatever_is_accepted_here_reads_as_an_object() {
        // Texts from pieces of JSON and of almost-JSON, drawn with a fixed seed: each one this
        // check accepts, the full reading reads as an object.
        let pieces = [
            "{", "}", "\"", "\"a\"", "\"b\"", ":", ",", " ", "\n", "1", "0", "-", ".", "e", "5",
            "true", "false", "null", "\\", "[", "]", "x", "\u{1}", "é", "\"k\":1",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut accepted = 0;
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut draw = seed;
            let mut text = String::from("{");
            for _ in 0..(draw % 12) {
                draw = draw.rotate_right(7) ^ 0x2545_f491_4f6c_dd1d;
                text.push_str(pieces[(draw % pieces.len() as u64) as usize]);
            }
            if !draw.is_multiple_of(3) {
                text.push('}');
            }
            if is_flat_object(&text) {
                accepted += 1;
                assert_eq!(read_shape(&text), Ok(Shape::Object), "{text:?}");
            }
        }
        assert!(
            accepted > 100,
            "the draws reach the accepted texts: {accepted}"
        );
    }
}
