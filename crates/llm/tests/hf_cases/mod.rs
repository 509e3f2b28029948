//! The transformers reference cases (`tests/data/hf/references.json`) of the
//! architectures added after the first six: files that split fused matrices into views
//! (phi3), scale branches (granite), skip norms (olmo2), skip rope on some layers
//! (smollm3), scale rope (qwen3_yarn) or route tokens to experts (qwen3moe, qwen2moe with
//! its shared expert, mixtral, gpt-oss with its sinks). `engine_hf_reference`'s Q8_0 test and
//! `engine_row_invariance` both run them.

/// The case names, as `references.json` keys them.
pub(crate) const NEW_ARCHITECTURE_CASES: [&str; 9] = [
    "phi3",
    "granite",
    "olmo2",
    "smollm3",
    "qwen3_yarn",
    "qwen3moe",
    "qwen2moe",
    "mixtral",
    "gpt-oss",
];
