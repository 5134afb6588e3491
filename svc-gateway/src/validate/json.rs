//! Strict JSON: a body is parsed once into a [`Value`], and an object that names a key twice is
//! refused.
//!
//! serde_json keeps the last of two equal keys, while other parsers keep the first. Were a
//! duplicate let through, the gateway could validate one `model` and a provider read another,
//! so the body forwarded would not be the body validated.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a body is not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON at all, or trailing bytes after the value.
    Syntax,
    /// An object names one key twice.
    DuplicateKey,
}

/// Parses `bytes` as one JSON value, refusing duplicate object keys at any depth.
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // Nesting is bounded by serde_json's own recursion limit (128 levels).
    let value = StrictValue
        .deserialize(&mut deserializer)
        .map_err(|error| {
            if error.to_string().starts_with(DUPLICATE) {
                JsonError::DuplicateKey
            } else {
                JsonError::Syntax
            }
        })?;
    deserializer.end().map_err(|_| JsonError::Syntax)?;
    Ok(value)
}

/// The message our visitor fails with on a duplicate; never shown to a client.
const DUPLICATE: &str = "duplicate object key";

/// Builds a [`Value`] like serde_json's own, but fails on a repeated key.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(DUPLICATE));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        let body = br#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            parse(body).unwrap(),
            serde_json::from_slice::<Value>(body).unwrap()
        );
    }

    #[test]
    fn refuses_a_duplicate_key_at_any_depth() {
        for body in [
            &br#"{"model": "a", "model": "b"}"#[..],
            br#"{"messages": [{"role": "user", "role": "system"}]}"#,
            br#"{"a": {"b": {"c": 1, "c": 1}}}"#,
        ] {
            assert_eq!(parse(body), Err(JsonError::DuplicateKey));
        }
        // Equal keys in different objects are fine.
        assert!(parse(br#"{"a": {"k": 1}, "b": {"k": 2}}"#).is_ok());
    }

    #[test]
    fn refuses_garbage_and_trailing_bytes() {
        for body in [&b""[..], b"{", b"{} {}", b"[1,]", b"nul", b"{\"a\":1}x"] {
            assert_eq!(parse(body), Err(JsonError::Syntax), "{body:?}");
        }
    }

    #[test]
    fn a_key_containing_the_marker_is_still_syntax() {
        // An escaped duplicate ("\u0061" is "a") is a duplicate all the same.
        assert_eq!(
            parse(br#"{"a": 1, "\u0061": 2}"#),
            Err(JsonError::DuplicateKey)
        );
    }
}
