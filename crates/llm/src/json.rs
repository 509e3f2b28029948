//! `JsonValue`: JSON that keeps the order of object keys as written (feature `json`).
//!
//! JSON schemas list properties in the order a response should have them, and chat
//! templates render tool definitions with `tojson` in the caller's key order (as
//! Python's `json.dumps` of a dict does), so requests are read into this type rather
//! than into a map that sorts its keys.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::error::{LlmError, Result};

/// A JSON value whose objects keep their keys in the order they were written (a key
/// written twice keeps its first place and its last value, as `json.loads` does).
#[derive(Clone, Debug, PartialEq)]
pub enum JsonValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<JsonValue>),
    /// An object, keys in order.
    Object(Vec<(String, JsonValue)>),
}

impl JsonValue {
    /// Parses JSON text.
    ///
    /// Errors: [`LlmError::Argument`] naming the line and column of a syntax error.
    pub fn parse(text: &str) -> Result<JsonValue> {
        serde_json::from_str(text).map_err(|e| LlmError::Argument {
            what: format!("invalid JSON: {e}"),
        })
    }

    /// The value under `key` of an object (`None` for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        match self {
            JsonValue::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The entries of an object.
    pub fn as_object(&self) -> Option<&[(String, JsonValue)]> {
        match self {
            JsonValue::Object(entries) => Some(entries),
            _ => None,
        }
    }

    /// The items of an array.
    pub fn as_array(&self) -> Option<&[JsonValue]> {
        match self {
            JsonValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            JsonValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A number as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            JsonValue::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// A number that is a whole number in `u64`'s range.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            JsonValue::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19)
                    .map(|f| f as u64)
            }),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, JsonValue::Null)
    }

    /// The JSON type name (`null`, `boolean`, `number`, `string`, `array`, `object`).
    pub fn type_name(&self) -> &'static str {
        match self {
            JsonValue::Null => "null",
            JsonValue::Bool(_) => "boolean",
            JsonValue::Number(_) => "number",
            JsonValue::String(_) => "string",
            JsonValue::Array(_) => "array",
            JsonValue::Object(_) => "object",
        }
    }

    /// Compact JSON text (`{"a":1,"b":[true]}`), keys in order.
    pub fn to_json(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for JsonValue {
    /// Compact JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonValue::Null => f.write_str("null"),
            JsonValue::Bool(b) => write!(f, "{b}"),
            JsonValue::Number(n) => write!(f, "{n}"),
            JsonValue::String(s) => {
                let quoted = serde_json::to_string(s).map_err(|_| fmt::Error)?;
                f.write_str(&quoted)
            }
            JsonValue::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            JsonValue::Object(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    let key = serde_json::to_string(k).map_err(|_| fmt::Error)?;
                    write!(f, "{key}:{v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

impl Serialize for JsonValue {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            JsonValue::Null => s.serialize_unit(),
            JsonValue::Bool(b) => s.serialize_bool(*b),
            JsonValue::Number(n) => n.serialize(s),
            JsonValue::String(v) => s.serialize_str(v),
            JsonValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            JsonValue::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::Null)
    }

    fn visit_none<E>(self) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<JsonValue, D::Error> {
        JsonValue::deserialize(d)
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<JsonValue, E> {
        serde_json::Number::from_f64(v)
            .map(JsonValue::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<JsonValue, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(JsonValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<JsonValue, A::Error> {
        let mut entries: Vec<(String, JsonValue)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, JsonValue>()? {
            match entries.iter_mut().find(|(key, _)| *key == k) {
                Some(entry) => entry.1 = v,
                None => entries.push((k, v)),
            }
        }
        Ok(JsonValue::Object(entries))
    }
}

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<JsonValue, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_and_round_trips() {
        let text = r#"{"z":1,"a":[true,null,"x\"y"],"m":{"b":2.5,"a":-3},"z":4}"#;
        let v = JsonValue::parse(text).expect("parse");
        assert_eq!(
            v.to_json(),
            r#"{"z":4,"a":[true,null,"x\"y"],"m":{"b":2.5,"a":-3}}"#
        );
        let keys: Vec<&str> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["z", "a", "m"]);
        assert_eq!(serde_json::to_string(&v).unwrap(), v.to_json());
        assert_eq!(
            v.get("m")
                .and_then(|m| m.get("b"))
                .and_then(JsonValue::as_f64),
            Some(2.5)
        );
        assert!(
            JsonValue::parse("{")
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
    }
}
