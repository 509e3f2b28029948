//! GGUF metadata values: the thirteen value types, scalars, strings and typed arrays.

use std::fmt;

/// A GGUF metadata value type id (`gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `u8`.
    U8 = 0,
    /// `i8`.
    I8 = 1,
    /// `u16`.
    U16 = 2,
    /// `i16`.
    I16 = 3,
    /// `u32`.
    U32 = 4,
    /// `i32`.
    I32 = 5,
    /// `f32`.
    F32 = 6,
    /// A one-byte bool (0 or 1).
    Bool = 7,
    /// A length-prefixed byte string (UTF-8 by convention).
    String = 8,
    /// An array: element type, count, elements.
    Array = 9,
    /// `u64`.
    U64 = 10,
    /// `i64`.
    I64 = 11,
    /// `f64`.
    F64 = 12,
}

impl ValueType {
    /// The type with GGUF id `id`, or `None` for an unknown id.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The GGUF id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The fewest bytes one value of this type takes in a file: the fixed size of a
    /// scalar, the length prefix of a string, the type and count of an array.
    pub const fn min_encoded_len(self) -> usize {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }

    /// The type's name as GGUF tools print it (`u32`, `string`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
///
/// Strings are kept as the file's bytes: GGUF strings are UTF-8 by convention, but
/// token pieces are byte strings, and a reader should not reject or alter them. Use
/// [`Value::as_str`] for text.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A byte string.
    String(Vec<u8>),
    /// A typed array.
    Array(Array),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// An integer of any width and signedness, widened to `i128`; `None` for other types.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v as i128,
            Value::I8(v) => v as i128,
            Value::U16(v) => v as i128,
            Value::I16(v) => v as i128,
            Value::U32(v) => v as i128,
            Value::I32(v) => v as i128,
            Value::U64(v) => v as i128,
            Value::I64(v) => v as i128,
            _ => return None,
        })
    }

    /// A float (`f32` or `f64`) or an integer, as `f64`; `None` for other types.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_integer().map(|v| v as f64),
        }
    }

    /// The bool, or `None` for other types.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The string as UTF-8 text, or `None` for other types and invalid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The array, or `None` for other types.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for messages: the type, with the value when it is a scalar
    /// or a short string (`u32 7`, `string "llama"`, `array of 32000 string`).
    pub fn describe(&self) -> String {
        match self {
            Value::String(bytes) if bytes.len() <= 40 => {
                format!("string {:?}", String::from_utf8_lossy(bytes))
            }
            Value::String(bytes) => format!("string of {} bytes", bytes.len()),
            Value::Array(a) => format!("array of {} {}", a.len(), a.element_type()),
            other => format!("{} {}", other.value_type(), ScalarDisplay(other)),
        }
    }
}

/// Displays a scalar value plainly (`7`, `1e-5`, `true`).
struct ScalarDisplay<'a>(&'a Value);

impl fmt::Display for ScalarDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::F32(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            other => match other.as_integer() {
                Some(v) => write!(f, "{v}"),
                None => f.write_str("…"),
            },
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.as_bytes().to_vec())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s.into_bytes())
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::U32(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::I32(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Self {
        Value::F32(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<Array> for Value {
    fn from(a: Array) -> Self {
        Value::Array(a)
    }
}

/// A GGUF array: one element type, stored as a typed vector (a 262k-entry score array
/// is one `Vec<f32>`, not 262k boxed values). Arrays may nest.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// Byte-string elements.
    String(Vec<Vec<u8>>),
    /// Nested arrays (each with its own element type).
    Array(Vec<Array>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f64` elements.
    F64(Vec<f64>),
}

impl Array {
    /// The element type.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at `index` as a [`Value`] (copied), or `None` past the end.
    pub fn get(&self, index: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(index)?),
            Array::I8(v) => Value::I8(*v.get(index)?),
            Array::U16(v) => Value::U16(*v.get(index)?),
            Array::I16(v) => Value::I16(*v.get(index)?),
            Array::U32(v) => Value::U32(*v.get(index)?),
            Array::I32(v) => Value::I32(*v.get(index)?),
            Array::F32(v) => Value::F32(*v.get(index)?),
            Array::Bool(v) => Value::Bool(*v.get(index)?),
            Array::String(v) => Value::String(v.get(index)?.clone()),
            Array::Array(v) => Value::Array(v.get(index)?.clone()),
            Array::U64(v) => Value::U64(*v.get(index)?),
            Array::I64(v) => Value::I64(*v.get(index)?),
            Array::F64(v) => Value::F64(*v.get(index)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_round_trip() {
        for id in 0..13 {
            assert_eq!(ValueType::from_id(id).unwrap().id(), id);
        }
        assert_eq!(ValueType::from_id(13), None);
    }

    #[test]
    fn numeric_views() {
        assert_eq!(Value::I8(-3).as_integer(), Some(-3));
        assert_eq!(Value::U64(u64::MAX).as_integer(), Some(u64::MAX as i128));
        assert_eq!(Value::F32(0.5).as_f64(), Some(0.5));
        assert_eq!(Value::from("x").as_integer(), None);
        assert_eq!(Value::String(vec![0xff]).as_str(), None);
        assert_eq!(Value::U32(7).describe(), "u32 7");
        assert_eq!(Value::from("llama").describe(), "string \"llama\"");
        assert_eq!(
            Value::from(Array::F32(vec![1.0; 3])).describe(),
            "array of 3 f32"
        );
    }
}
