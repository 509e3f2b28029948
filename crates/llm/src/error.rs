//! The crate's error type.

/// Everything that can go wrong in tempra-llm. Variants name the file, key, tensor or
/// byte offset at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A tensor-layer error.
    #[error(transparent)]
    Tensor(#[from] tempra_tensor::TensorError),
    /// A GPU backend error (no adapter, a device error) from the GPU engine.
    #[cfg(feature = "gpu")]
    #[error(transparent)]
    Gpu(#[from] tempra_backend_gpu::GpuError),
    /// A malformed, damaged or unsupported GGUF file: the byte offset where reading
    /// failed, the metadata key or tensor being read (or `header`), and what was wrong.
    #[error("GGUF byte {offset} ({key_or_tensor}): {what}")]
    Gguf {
        /// Byte offset in the file.
        offset: u64,
        /// `header`, `metadata key `name``, `tensor `name``, ...
        key_or_tensor: String,
        /// What was wrong.
        what: String,
    },
    /// A malformed llama2.c checkpoint or tokenizer file.
    #[error("llama2.c {file} byte {offset}: {what}")]
    Llama2c {
        /// `checkpoint` or `tokenizer`.
        file: &'static str,
        /// Byte offset in the file.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// A metadata key the model needs is absent.
    #[error("metadata key `{key}` is missing")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key holds a value of the wrong type.
    #[error("metadata key `{key}` holds {found}, expected {expected}")]
    KeyType {
        /// The key.
        key: String,
        /// The type the reader expected.
        expected: &'static str,
        /// The type (and value, when short) found.
        found: String,
    },
    /// A metadata key holds a value of the right type but an unusable value.
    #[error("metadata key `{key}`: {what}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What was wrong with the value.
        what: String,
    },
    /// `general.architecture` names an architecture tempra does not implement.
    #[error(
        "unsupported architecture `{arch}` (supported: {})",
        crate::model_config::Arch::ALL.map(crate::model_config::Arch::name).join(", ")
    )]
    UnsupportedArch {
        /// The architecture named by the file.
        arch: String,
    },
    /// A tensor the caller asked for is not in the file.
    #[error("tensor `{name}` is not in the model file")]
    MissingTensor {
        /// The tensor name.
        name: String,
    },
    /// A tensor that exists but cannot be used as asked (wrong dtype or shape for an
    /// operation such as quantization).
    #[error("tensor `{name}`: {what}")]
    TensorData {
        /// The tensor name.
        name: String,
        /// What was wrong.
        what: String,
    },
    /// A bad argument to a library function (an unknown quantization type, a bad model
    /// shape description, ...).
    #[error("{what}")]
    Argument {
        /// What was wrong.
        what: String,
    },
    /// `tokenizer.ggml.model` or `tokenizer.ggml.pre` names a tokenizer tempra does not
    /// implement.
    #[error("metadata key `{key}`: unknown tokenizer `{name}` (supported: {supported})")]
    UnknownTokenizer {
        /// `tokenizer.ggml.model` or `tokenizer.ggml.pre`.
        key: &'static str,
        /// The name the file gives.
        name: String,
        /// The names tempra supports, comma-separated.
        supported: String,
    },
    /// A per-token tokenizer array (scores, token types) whose length differs from the
    /// number of tokens.
    #[error("metadata key `{key}` has {found} entries, but the vocabulary has {expected} tokens")]
    VocabLength {
        /// The key of the array.
        key: &'static str,
        /// Its length.
        found: usize,
        /// The number of tokens.
        expected: usize,
    },
    /// Two vocabulary entries with the same text.
    #[error("duplicate token {text:?} in the vocabulary (ids {first} and {second})")]
    DuplicateToken {
        /// The text (lossily decoded).
        text: String,
        /// The first id.
        first: u32,
        /// The second id.
        second: u32,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is out of range (vocabulary of {n_vocab} tokens)")]
    TokenId {
        /// The id.
        id: u64,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// More positions than the session's context holds.
    #[error("context full: {needed} positions needed, the context holds {capacity} (raise --ctx)")]
    ContextFull {
        /// Positions needed.
        needed: usize,
        /// The context length.
        capacity: usize,
    },
    /// Weights plus KV cache plus the step arena would not fit in available memory.
    #[error(
        "not enough memory: weights {weights_bytes} B + KV cache {kv_bytes} B + step arena {arena_bytes} B = {total} B, but only {available_bytes} B are available (lower --ctx or use a smaller --kv-type: f16, q8_0, q4_0)",
        total = weights_bytes + kv_bytes + arena_bytes
    )]
    OutOfMemory {
        /// Weight bytes.
        weights_bytes: u64,
        /// KV cache bytes.
        kv_bytes: u64,
        /// Step arena bytes (every intermediate of the largest step).
        arena_bytes: u64,
        /// Memory available.
        available_bytes: u64,
    },
    /// A generation was cancelled.
    #[error("generation cancelled")]
    Cancelled,
    /// A chat template that does not compile or fails to render (a `raise_exception`
    /// call, an undefined variable used as a value, ...).
    #[error("chat template: {what}")]
    ChatTemplate {
        /// What went wrong, with the template line where known.
        what: String,
    },
    /// The server's KV slots plus the weights and the step arena would not fit in
    /// available memory.
    #[error(
        "not enough memory for {slots} KV slots: {slots} x {per_slot_bytes} B (context {context} positions of {per_position} B) = {kv_bytes} B + weights {weights_bytes} B + step arena {arena_bytes} B = {total} B, but only {available_bytes} B are available (lower --kv-slots or --ctx, or use a smaller --kv-type: f16, q8_0, q4_0)",
        kv_bytes = (*slots as u64).saturating_mul(*per_slot_bytes),
        per_position = per_slot_bytes / (*context as u64).max(1),
        total = (*slots as u64).saturating_mul(*per_slot_bytes).saturating_add(weights_bytes + arena_bytes)
    )]
    SlotsOutOfMemory {
        /// KV slots asked for.
        slots: usize,
        /// Context length of each slot.
        context: usize,
        /// KV cache bytes of one slot.
        per_slot_bytes: u64,
        /// Weight bytes.
        weights_bytes: u64,
        /// Step arena bytes (sized for the slots' batch).
        arena_bytes: u64,
        /// Memory available.
        available_bytes: u64,
    },
    /// An autograd error from the model forward.
    #[error(transparent)]
    Autograd(#[from] tempra_autograd::AutogradError),
    /// A GBNF grammar that does not parse or compile: the line and column (1-based,
    /// in characters) where it went wrong, and what was wrong.
    #[error("grammar line {line}, column {column}: {what}")]
    Grammar {
        /// The line.
        line: usize,
        /// The column.
        column: usize,
        /// What was wrong.
        what: String,
    },
    /// A JSON schema tempra cannot turn into a grammar: the JSON pointer of the part at
    /// fault (`#/properties/age/multipleOf`) and what was wrong with it.
    #[error("JSON schema at `{pointer}`: {what}")]
    JsonSchema {
        /// The JSON pointer of the schema part at fault (`#` is the whole schema).
        pointer: String,
        /// What was wrong.
        what: String,
    },
    /// Constrained sampling cannot go on or cannot start: the grammar is too ambiguous
    /// (too many parses alive at once), needs more parser states than the bound, or
    /// cannot be finished within the tokens left.
    #[error("constrained output: {what}")]
    Constraint {
        /// What went wrong.
        what: String,
    },
    /// Text input that is not valid UTF-8.
    #[error("{path}: invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// The file (or `<stdin>`, `<argument>`).
        path: String,
        /// The byte offset of the first invalid sequence.
        offset: usize,
    },
}

/// Shorthand for results in this crate.
pub type Result<T, E = LlmError> = std::result::Result<T, E>;
