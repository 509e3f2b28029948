//! `Limits`: the caps the GGUF reader enforces before trusting any count or length in a
//! file.

/// Caps on what a GGUF file may declare. Every count and length read from a file is
/// checked against these *and* against the bytes left in the file before anything is
/// allocated, so a crafted file cannot make the reader allocate more than a small
/// multiple of the file's own size.
///
/// The defaults are far above any real model (the largest vocabularies hold ~260k tokens,
/// the largest merge lists ~500k entries, chat templates are tens of KiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most metadata key/value pairs.
    pub max_kv_count: u64,
    /// Most tensors.
    pub max_tensor_count: u64,
    /// Longest metadata key, in bytes.
    pub max_key_len: u64,
    /// Longest string value, in bytes.
    pub max_string_len: u64,
    /// Longest tensor name, in bytes.
    pub max_tensor_name_len: u64,
    /// Most elements in one array.
    pub max_array_len: u64,
    /// Deepest array nesting (an array of scalars has depth 1).
    pub max_array_depth: u32,
    /// Largest `general.alignment`.
    pub max_alignment: u64,
}

/// Most dims a GGUF tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_TENSOR_DIMS: usize = 4;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_kv_count: 1 << 16,
            max_tensor_count: 1 << 20,
            max_key_len: 1 << 16,
            max_string_len: 1 << 24,
            max_tensor_name_len: 1 << 10,
            max_array_len: 1 << 26,
            max_array_depth: 8,
            max_alignment: 1 << 24,
        }
    }
}
