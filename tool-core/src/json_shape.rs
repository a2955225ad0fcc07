//! The check that JSON text reads as one [`Value`](serde_json::Value) would read it, with each
//! key given once in every object (I-JSON, RFC 7493 §2.3), building nothing: what
//! [`Arguments::from_text`](crate::dispatch::Arguments::from_text) and the formats' text readers run on the
//! arguments of every call before anything else looks at them.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::quote::{excerpt, shortened};

mod flat;

/// A call the provider format could not read: the call still gets a result, an
/// `invalid_arguments` error saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedCall {
    /// What is wrong, in words the model can act on.
    pub what: String,
    /// The detail (the parser's message, the raw text).
    pub why: String,
}

/// The kind of one JSON value, read as [`serde_json::Value`] reads it (numbers in range,
/// strings with valid escapes, at most serde_json's nesting) with nothing kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Shape {
    /// The kind with its article, as [`crate::call::json_kind`] names it.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Shape::Null => "null",
            Shape::Bool => "a boolean",
            Shape::Number => "a number",
            Shape::String => "a string",
            Shape::Array => "an array",
            Shape::Object => "an object",
        }
    }
}

/// The shape of the one JSON value `text` holds, or why a [`Value`](serde_json::Value) could not
/// be read from it, or the first key some object of it gives twice.
pub(crate) fn shape_of(text: &str) -> Result<Shape, MalformedCall> {
    // Most arguments are a flat object of a few plain keys and values, checked in one pass.
    if flat::is_flat_object(text) {
        return Ok(Shape::Object);
    }
    read_shape(text)
}

/// [`shape_of`], by reading `text` as a [`Value`](serde_json::Value) would be read.
fn read_shape(text: &str) -> Result<Shape, MalformedCall> {
    let trace = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read = ShapeSeed { trace: &trace }
        .deserialize(&mut deserializer)
        .and_then(|shape| deserializer.end().map(|()| shape));
    match read {
        Ok(shape) => Ok(shape),
        Err(err) => Err(match trace.into_inner() {
            Some(repeated) => repeated.into_malformed(),
            None => unreadable(text, &err),
        }),
    }
}

/// Why `text` could not be read: not JSON at all, or JSON holding a value that a
/// [`Value`](serde_json::Value) cannot hold.
fn unreadable(text: &str, err: &serde_json::Error) -> MalformedCall {
    // The grammar alone is checked without limits: text that passes it holds a value that is
    // valid JSON but beyond what can be read.
    if serde_json::from_str::<IgnoredAny>(text).is_err() {
        return MalformedCall {
            what: "the arguments are not valid JSON".into(),
            why: format!("{err} in {}", excerpt(text)),
        };
    }
    MalformedCall {
        what: "the arguments hold a value that cannot be read".into(),
        why: format!(
            "{err} in {}; at most {MAX_DEPTH} arrays and objects may nest, numbers must fit a \
             64-bit float, and a \\u escape must not be half of a surrogate pair",
            excerpt(text)
        ),
    }
}

/// The deepest nesting a [`Value`](serde_json::Value) is read with: this many brackets open at
/// once, the outermost included (serde_json's recursion limit).
pub(crate) const MAX_DEPTH: usize = 127;

/// Whether `value` has more than `limit` arrays and objects open at once (the outermost
/// included), found without recursion: a tree built by hand may be nested beyond any limit, and
/// the recursive walks over a tree (serializing, cloning, validating) must not meet it.
pub(crate) fn deeper_than(value: &serde_json::Value, limit: usize) -> bool {
    use serde_json::Value;

    /// The children of one open container, still to visit.
    enum Children<'a> {
        Items(std::slice::Iter<'a, Value>),
        Members(serde_json::map::Values<'a>),
    }

    fn children(value: &Value) -> Option<Children<'_>> {
        match value {
            Value::Array(items) => Some(Children::Items(items.iter())),
            Value::Object(members) => Some(Children::Members(members.values())),
            _ => None,
        }
    }

    let mut open: Vec<Children<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(grandchildren) = next.and_then(children) {
            if open.len() == limit {
                return true;
            }
            open.push(grandchildren);
        }
        let Some(innermost) = open.last_mut() else {
            return false;
        };
        next = match innermost {
            Children::Items(items) => items.next(),
            Children::Members(members) => members.next(),
        };
        if next.is_none() {
            open.pop();
        }
    }
}

/// A key given twice: the key, and the path to it, innermost first.
struct Repeated {
    key: String,
    path: Vec<Segment>,
}

enum Segment {
    Key(String),
    Index(usize),
}

impl Repeated {
    /// The JSON pointer to the repeated member (RFC 6901), cut to a readable length.
    fn pointer(&self) -> String {
        const LIMIT: usize = 200;
        let mut pointer = String::new();
        for segment in self.path.iter().rev() {
            pointer.push('/');
            match segment {
                Segment::Key(key) => pointer.push_str(&key.replace('~', "~0").replace('/', "~1")),
                Segment::Index(index) => pointer.push_str(&index.to_string()),
            }
            if pointer.len() > LIMIT {
                break;
            }
        }
        shortened(&pointer, LIMIT).into_owned()
    }

    fn into_malformed(self) -> MalformedCall {
        let pointer = self.pointer();
        MalformedCall {
            what: format!(
                "the arguments give the key {} more than once",
                excerpt(&self.key)
            ),
            why: format!(
                "{pointer} appears twice in one object; a key may appear once in a JSON object \
                 (RFC 7493 §2.3), and which of the values was meant cannot be known, so the call \
                 did not run; give each key once"
            ),
        }
    }
}

/// Where a repeated key is recorded as the error unwinds; `None` while there is none.
type Trace = RefCell<Option<Repeated>>;

/// Notes, as an error passes out of the value at `segment`, that the value lies there.
fn within<'a, E>(
    trace: &'a Trace,
    segment: impl FnOnce() -> Segment + 'a,
) -> impl FnOnce(E) -> E + 'a {
    move |err| {
        if let Some(repeated) = trace.borrow_mut().as_mut() {
            repeated.path.push(segment());
        }
        err
    }
}

#[derive(Clone, Copy)]
struct ShapeSeed<'t> {
    trace: &'t Trace,
}

impl<'de> DeserializeSeed<'de> for ShapeSeed<'_> {
    type Value = Shape;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ShapeSeed<'_> {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Bool)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::String)
    }

    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut index = 0;
        while seq
            .next_element_seed(self)
            .map_err(within(self.trace, move || Segment::Index(index)))?
            .is_some()
        {
            index += 1;
        }
        Ok(Shape::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut seen = Seen::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if !seen.is_new(&key.0) {
                let key = key.0.into_owned();
                *self.trace.borrow_mut() = Some(Repeated {
                    path: vec![Segment::Key(key.clone())],
                    key,
                });
                return Err(de::Error::custom("a key appears twice in one object"));
            }
            map.next_value_seed(self)
                .map_err(within(self.trace, || Segment::Key(key.0.to_string())))?;
            seen.keep(key.0);
        }
        Ok(Shape::Object)
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }

            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }

            fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

/// How many keys of one object are compared one by one before they go in a hash set.
const FEW: usize = 8;

/// The keys of one object read so far: the first few in place (most objects have few keys, and
/// need no allocation), the rest in a set, so that a huge object is checked in linear time.
#[derive(Default)]
struct Seen<'de> {
    few: [Option<Cow<'de, str>>; FEW],
    len: usize,
    many: Option<HashSet<Cow<'de, str>>>,
}

impl<'de> Seen<'de> {
    /// Whether `key` is not among the keys kept so far.
    fn is_new(&self, key: &str) -> bool {
        let mut few = self.few[..self.len.min(FEW)].iter().flatten();
        !few.any(|seen| seen == key) && !self.many.as_ref().is_some_and(|many| many.contains(key))
    }

    /// Keeps a new key.
    fn keep(&mut self, key: Cow<'de, str>) {
        if self.len < FEW {
            self.few[self.len] = Some(key);
        } else {
            self.many.get_or_insert_default().insert(key);
        }
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_read_as_a_value_reads_them() {
        assert_eq!(
            shape_of(r#"{"a": [1, 2.5, "x", null, true]}"#),
            Ok(Shape::Object)
        );
        assert_eq!(shape_of("[]"), Ok(Shape::Array));
        assert_eq!(shape_of(" 3 "), Ok(Shape::Number));
        assert_eq!(shape_of("\"\\ud83d\\ude00\""), Ok(Shape::String));
        assert_eq!(shape_of("null"), Ok(Shape::Null));
        let deepest = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(shape_of(&deepest), Ok(Shape::Array));
        assert!(serde_json::from_str::<serde_json::Value>(&deepest).is_ok());
    }

    #[test]
    fn text_that_is_not_json_is_not_valid_json() {
        for text in ["{\"a\": ", "{a: 1}", "[1,]", "{} {}", "", "\"\\x\""] {
            let err = shape_of(text).unwrap_err();
            assert_eq!(err.what, "the arguments are not valid JSON", "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_err());
        }
    }

    #[test]
    fn values_beyond_what_a_value_holds_are_named() {
        let too_deep = MAX_DEPTH + 1;
        let deep = format!("{}{}", "[".repeat(too_deep), "]".repeat(too_deep));
        let huge = r#"{"amount": 1e999}"#;
        let lone = r#"{"note": "\ud800"}"#;
        let very_deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        for text in [deep.as_str(), huge, lone, &very_deep] {
            let err = shape_of(text).unwrap_err();
            assert_eq!(err.what, "the arguments hold a value that cannot be read");
            assert!(err.why.contains("64-bit float"), "{}", err.why);
            assert!(err.why.len() < 600, "{}", err.why);
            assert!(serde_json::from_str::<serde_json::Value>(text).is_err());
        }
        let err = shape_of(huge).unwrap_err();
        assert!(err.why.starts_with("number out of range"), "{}", err.why);
    }

    #[test]
    fn the_depth_of_a_tree_is_measured_without_recursion() {
        use serde_json::{Map, Value, json};
        // Built by hand: `json!` would serialize `inner` again at each level.
        let nest = |depth: usize| {
            (0..depth).fold(json!(1), |inner, level| {
                if level % 2 == 0 {
                    Value::Array(vec![json!(0), inner])
                } else {
                    Value::Object(Map::from_iter([
                        ("a".into(), json!(0)),
                        ("b".into(), inner),
                    ]))
                }
            })
        };
        assert!(!deeper_than(&json!(1), 0));
        assert!(deeper_than(&json!([]), 0));
        assert!(!deeper_than(&nest(MAX_DEPTH), MAX_DEPTH));
        assert!(deeper_than(&nest(MAX_DEPTH + 1), MAX_DEPTH));
        let deep = nest(10_000);
        assert!(deeper_than(&deep, MAX_DEPTH));
        // Dropping it is recursive in serde_json; keep it alive past the test's end.
        std::mem::forget::<Value>(deep);
    }

    #[test]
    fn a_repeated_key_is_named_with_its_pointer_at_any_depth() {
        let cases = [
            (r#"{"amount": 5, "amount": 5000}"#, "\"amount\"", "/amount"),
            (
                r#"{"a": [0, {"b": {"c~/": 1, "c~/": 2}}]}"#,
                "\"c~/\"",
                "/a/1/b/c~0~1",
            ),
            (r#"[{"x": 1}, {"y": 1, "\u0079": 2}]"#, "\"y\"", "/1/y"),
        ];
        for (text, key, pointer) in cases {
            let err = shape_of(text).unwrap_err();
            assert_eq!(
                err.what,
                format!("the arguments give the key {key} more than once")
            );
            assert!(
                err.why.starts_with(&format!("{pointer} appears twice")),
                "{}",
                err.why
            );
        }
        // Many keys, the repeated one last: found, and in linear time.
        let mut many: Vec<String> = (0..50_000).map(|i| format!("\"k{i}\": {i}")).collect();
        many.push("\"k7\": 0".into());
        let err = shape_of(&format!("{{{}}}", many.join(","))).unwrap_err();
        assert!(err.why.starts_with("/k7 appears twice"), "{}", err.why);
        // And one past the first few, found in the set.
        many.pop();
        many.push("\"k40000\": 0".into());
        let err = shape_of(&format!("{{{}}}", many.join(","))).unwrap_err();
        assert!(err.why.starts_with("/k40000 appears twice"), "{}", err.why);
        assert_eq!(shape_of(r#"{"a": 1, "b": {"a": 2}}"#), Ok(Shape::Object));
    }
}
