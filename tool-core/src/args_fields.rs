//! One reader of a JSON object into a tool's plain parameters, shared by every tool.
//!
//! serde's derive writes, for each struct, a field enum, its visitor, a sequence visitor and a
//! map visitor: a few hundred lines that every crate of tools compiles again per tool. The
//! arguments struct `#[tool]` generates for plain parameters without `#[serde]` attributes needs
//! none of that: it implements [`ArgsFields`] (its wire names, and how to read field `i`), and
//! [`read_fields`] walks the object once for every tool: the key looked up among the names, a key
//! given twice or unknown refused, a missing field read as serde reads it (`None` for an
//! `Option`, an error otherwise). The errors are serde's own (`unknown field`, `duplicate
//! field`, `missing field`), and only a JSON object is read: an array, which serde's derive would
//! read field by field, is refused as the schema refuses it.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

/// The plain parameters of a tool, as the struct `#[tool]` generates for them: at most 64
/// fields (a tool with more keeps serde's derive).
pub trait ArgsFields<'de>: Sized {
    /// Each field's name on the wire, in order.
    const NAMES: &'static [&'static str];
    /// A slot per field, each `None` until the field is read.
    type Slots;

    /// The slots, each `None`.
    fn slots() -> Self::Slots;

    /// Reads the value of field `index` (of [`NAMES`](Self::NAMES)) into its slot.
    fn read<A: MapAccess<'de>>(
        slots: &mut Self::Slots,
        index: usize,
        map: &mut A,
    ) -> Result<(), A::Error>;

    /// The struct, from its slots; a field never read is [`missing`].
    fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E>;
}

/// Reads `T` from `deserializer` as a JSON object of its fields. It asks for a map, not a
/// struct: a struct would let a format read an array too, and serde_json's map reading is the
/// smaller one to compile for every tool.
pub fn read_fields<'de, T: ArgsFields<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_map(FieldsVisitor(PhantomData))
}

/// A field that was not given: `None` for an `Option`, serde's `missing field` error for any
/// other type, as serde's derive reads it.
pub fn missing<'de, T: de::Deserialize<'de>, E: de::Error>(
    slot: Option<T>,
    name: &'static str,
) -> Result<T, E> {
    match slot {
        Some(value) => Ok(value),
        None => T::deserialize(Missing(name, PhantomData)),
    }
}

struct FieldsVisitor<T>(PhantomData<fn() -> T>);

impl<'de, T: ArgsFields<'de>> Visitor<'de> for FieldsVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a JSON object of the arguments {:?}", T::NAMES)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut slots = T::slots();
        let mut seen: u64 = 0;
        while let Some(index) = map.next_key_seed(KeyIndex(T::NAMES))? {
            let bit = 1u64 << index;
            if seen & bit != 0 {
                return Err(de::Error::duplicate_field(T::NAMES[index]));
            }
            seen |= bit;
            T::read(&mut slots, index, &mut map)?;
        }
        T::finish(slots)
    }
}

/// A key, as the index of its name among the fields; an unknown key is serde's `unknown field`.
struct KeyIndex(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeyIndex {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for KeyIndex {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        self.0
            .iter()
            .position(|name| *name == key)
            .ok_or_else(|| de::Error::unknown_field(key, self.0))
    }
}

/// The deserializer of a field that is absent: an `Option` reads `None`, anything else fails
/// with `missing field`.
struct Missing<E>(&'static str, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, E> {
        Err(de::Error::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    /// What `#[tool]` generates for `(order_id: String, note: Option<String>)`.
    #[derive(Debug, PartialEq)]
    struct Args {
        order_id: String,
        note: Option<String>,
    }

    impl<'de> Deserialize<'de> for Args {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            read_fields(deserializer)
        }
    }

    impl<'de> ArgsFields<'de> for Args {
        const NAMES: &'static [&'static str] = &["order_id", "note"];
        type Slots = (Option<String>, Option<Option<String>>);

        fn slots() -> Self::Slots {
            (None, None)
        }

        fn read<A: MapAccess<'de>>(
            slots: &mut Self::Slots,
            index: usize,
            map: &mut A,
        ) -> Result<(), A::Error> {
            match index {
                0 => slots.0 = Some(map.next_value()?),
                _ => slots.1 = Some(map.next_value()?),
            }
            Ok(())
        }

        fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E> {
            Ok(Args {
                order_id: missing(slots.0, "order_id")?,
                note: missing(slots.1, "note")?,
            })
        }
    }

    /// The same fields, read by serde's derive: the reference.
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Derived {
        order_id: String,
        note: Option<String>,
    }

    fn both(text: &str) -> (Result<Args, String>, Result<Derived, String>) {
        (
            serde_json::from_str(text).map_err(|e| e.to_string()),
            serde_json::from_str(text).map_err(|e| e.to_string()),
        )
    }

    #[test]
    fn reads_as_serde_derive_reads_and_fails_with_the_same_errors() {
        for text in [
            r#"{"order_id": "ORD-1"}"#,
            r#"{"note": "late", "order_id": "ORD-1"}"#,
            r#"{"order_id": "ORD-1", "note": null}"#,
            r#"{"order_id": "ORD-\u0031"}"#,
            r#"{"order_\u0069d": "ORD-1"}"#,
            r#"{"order_id": "ORD-1", "order_id": "ORD-2"}"#,
            r#"{"order_id": "ORD-1", "amount": 5}"#,
            r#"{"note": "late"}"#,
            r#"{"order_id": 1001}"#,
            r#"{}"#,
            r#"{"order_id": "ORD-1"} x"#,
        ] {
            let (ours, derived) = both(text);
            match (ours, derived) {
                (Ok(ours), Ok(derived)) => {
                    assert_eq!((ours.order_id, ours.note), (derived.order_id, derived.note));
                }
                (Err(ours), Err(derived)) => assert_eq!(ours, derived, "{text}"),
                (ours, derived) => panic!("{text}: {ours:?} against {derived:?}"),
            }
        }
    }

    #[test]
    fn only_an_object_is_read() {
        // serde's derive reads a struct from an array too; the schema allows only an object.
        assert!(serde_json::from_str::<Derived>(r#"["ORD-1", null]"#).is_ok());
        let err = serde_json::from_str::<Args>(r#"["ORD-1", null]"#).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid type: sequence"),
            "{err}"
        );
    }
}
