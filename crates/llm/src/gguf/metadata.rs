//! `Metadata`: a model file's key/value pairs, in file order, with typed getters whose
//! errors name the key.

use std::collections::HashMap;

use super::value::{Array, Value};
use crate::error::{LlmError, Result};

/// A model file's metadata: keys in file (or insertion) order, looked up by name.
///
/// The typed getters return [`LlmError::MissingKey`] for an absent key and
/// [`LlmError::KeyType`] / [`LlmError::InvalidValue`] for a value of the wrong type or
/// range; the `opt_` getters return `Ok(None)` for an absent key.
///
/// ```
/// use tempra_llm::gguf::{Metadata, Value};
///
/// let mut md = Metadata::new();
/// md.set("general.architecture", "llama");
/// md.set("llama.block_count", 2u32);
/// assert_eq!(md.get_str("general.architecture")?, "llama");
/// assert_eq!(md.get_usize("llama.block_count")?, 2);
/// assert!(md.get_usize("llama.context_length").is_err());
/// # Ok::<(), tempra_llm::LlmError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`: replaces the value in place when the key exists, else
    /// appends it.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
            }
        }
    }

    /// Appends `key`, or returns `false` (leaving the map unchanged) when it is already
    /// present: the reader's duplicate-key check.
    pub(crate) fn insert_new(&mut self, key: String, value: Value) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        true
    }

    /// Removes `key`, returning its value; later keys keep their order.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(value)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every key and value, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| LlmError::MissingKey {
            key: key.to_string(),
        })
    }

    /// The string value of `key` as UTF-8 text.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        let value = self.require(key)?;
        match value {
            Value::String(bytes) => {
                std::str::from_utf8(bytes).map_err(|e| LlmError::InvalidValue {
                    key: key.to_string(),
                    what: format!("not valid UTF-8 ({e})"),
                })
            }
            other => Err(type_error(key, "a string", other)),
        }
    }

    /// The string value of `key`, or `None` when absent.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.opt(key, Self::get_str)
    }

    /// An integer value of `key` (any GGUF integer type) that fits `usize`.
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        let value = self.require(key)?;
        let v = value
            .as_integer()
            .ok_or_else(|| type_error(key, "an integer", value))?;
        usize::try_from(v).map_err(|_| LlmError::InvalidValue {
            key: key.to_string(),
            what: format!("{v} is not a valid count"),
        })
    }

    /// An integer value of `key`, or `None` when absent.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.opt(key, Self::get_usize)
    }

    /// An integer value of `key` that fits `u32` (token ids).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        let value = self.require(key)?;
        let v = value
            .as_integer()
            .ok_or_else(|| type_error(key, "an integer", value))?;
        u32::try_from(v).map_err(|_| LlmError::InvalidValue {
            key: key.to_string(),
            what: format!("{v} does not fit u32"),
        })
    }

    /// A `u32`-sized integer value of `key`, or `None` when absent.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt(key, Self::get_u32)
    }

    /// A float value of `key` (`f32`, `f64`, or an integer), as `f64`.
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        let value = self.require(key)?;
        value
            .as_f64()
            .ok_or_else(|| type_error(key, "a number", value))
    }

    /// A float value of `key`, or `None` when absent.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.opt(key, Self::get_f64)
    }

    /// The bool value of `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        let value = self.require(key)?;
        value
            .as_bool()
            .ok_or_else(|| type_error(key, "a bool", value))
    }

    /// The bool value of `key`, or `None` when absent.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.opt(key, Self::get_bool)
    }

    /// The array value of `key`.
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        let value = self.require(key)?;
        value
            .as_array()
            .ok_or_else(|| type_error(key, "an array", value))
    }

    /// The array value of `key`, or `None` when absent.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>> {
        self.opt(key, Self::get_array)
    }

    /// The string array of `key` (token pieces, merges), as byte strings.
    pub fn get_string_array(&self, key: &str) -> Result<&[Vec<u8>]> {
        match self.get_array(key)? {
            Array::String(v) => Ok(v),
            other => Err(array_type_error(key, "an array of string", other)),
        }
    }

    /// The `f32` array of `key` (token scores).
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32]> {
        match self.get_array(key)? {
            Array::F32(v) => Ok(v),
            other => Err(array_type_error(key, "an array of f32", other)),
        }
    }

    /// The `i32` array of `key` (token types).
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        match self.get_array(key)? {
            Array::I32(v) => Ok(v),
            other => Err(array_type_error(key, "an array of i32", other)),
        }
    }

    fn opt<'a, T>(
        &'a self,
        key: &str,
        get: impl FnOnce(&'a Self, &str) -> Result<T>,
    ) -> Result<Option<T>> {
        if self.contains(key) {
            get(self, key).map(Some)
        } else {
            Ok(None)
        }
    }
}

fn type_error(key: &str, expected: &'static str, found: &Value) -> LlmError {
    LlmError::KeyType {
        key: key.to_string(),
        expected,
        found: found.describe(),
    }
}

fn array_type_error(key: &str, expected: &'static str, found: &Array) -> LlmError {
    LlmError::KeyType {
        key: key.to_string(),
        expected,
        found: format!("an array of {}", found.element_type()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_in_place_and_remove_keeps_order() {
        let mut md = Metadata::new();
        md.set("a", 1u32);
        md.set("b", 2u32);
        md.set("c", 3u32);
        md.set("a", 4u32);
        assert_eq!(
            md.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(md.remove("b"), Some(Value::U32(2)));
        assert_eq!(md.get_usize("c").unwrap(), 3);
        assert_eq!(md.get_usize("a").unwrap(), 4);
        assert_eq!(md.len(), 2);
    }

    #[test]
    fn getter_errors_name_the_key() {
        let mut md = Metadata::new();
        md.set("x", "text");
        md.set("n", Value::I32(-1));
        md.set("bad", Value::String(vec![0xff, 0xfe]));
        let e = md.get_usize("x").unwrap_err().to_string();
        assert!(e.contains("`x`") && e.contains("string"), "{e}");
        let e = md.get_usize("n").unwrap_err().to_string();
        assert!(e.contains("`n`") && e.contains("-1"), "{e}");
        let e = md.get_str("missing").unwrap_err().to_string();
        assert!(e.contains("`missing`") && e.contains("missing"), "{e}");
        assert!(md.get_str("bad").is_err());
        assert_eq!(md.opt_usize("missing").unwrap(), None);
        assert!(md.get_f32_array("x").is_err());
    }
}
