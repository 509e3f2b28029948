//! Metadata key names (llama.cpp's `LLM_KV_*`), so that no key is spelled twice.
//!
//! Architecture-specific keys are `{arch}.{suffix}`: build them with [`arch_key`].

/// `general.architecture`: the model architecture (`llama`, `qwen2`, ...).
pub const GENERAL_ARCHITECTURE: &str = "general.architecture";
/// `general.name`: a human-readable model name.
pub const GENERAL_NAME: &str = "general.name";
/// `general.alignment`: the tensor data alignment (`u32`, a power of two).
pub const GENERAL_ALIGNMENT: &str = "general.alignment";
/// `general.file_type`: llama.cpp's `llama_ftype` of the file (`u32`).
pub const GENERAL_FILE_TYPE: &str = "general.file_type";
/// `general.quantization_version`: ggml's quantization format version (`u32`, 2).
pub const GENERAL_QUANTIZATION_VERSION: &str = "general.quantization_version";

/// `tokenizer.ggml.model`: `llama` (SentencePiece), `gpt2` (byte-level BPE), ...
pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
/// `tokenizer.ggml.pre`: the pre-tokenizer of a `gpt2` vocabulary.
pub const TOKENIZER_PRE: &str = "tokenizer.ggml.pre";
/// `tokenizer.ggml.tokens`: the pieces (array of string).
pub const TOKENIZER_TOKENS: &str = "tokenizer.ggml.tokens";
/// `tokenizer.ggml.scores`: one score per piece (array of f32).
pub const TOKENIZER_SCORES: &str = "tokenizer.ggml.scores";
/// `tokenizer.ggml.token_type`: one [`super::TokenType`] per piece (array of i32).
pub const TOKENIZER_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// `tokenizer.ggml.merges`: BPE merges (array of string).
pub const TOKENIZER_MERGES: &str = "tokenizer.ggml.merges";
/// `tokenizer.ggml.bos_token_id`.
pub const TOKENIZER_BOS_ID: &str = "tokenizer.ggml.bos_token_id";
/// `tokenizer.ggml.eos_token_id`.
pub const TOKENIZER_EOS_ID: &str = "tokenizer.ggml.eos_token_id";
/// `tokenizer.ggml.unknown_token_id`.
pub const TOKENIZER_UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
/// `tokenizer.ggml.add_bos_token`.
pub const TOKENIZER_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
/// `tokenizer.ggml.add_eos_token`.
pub const TOKENIZER_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";

/// `{arch}.context_length`.
pub const CONTEXT_LENGTH: &str = "context_length";
/// `{arch}.embedding_length`.
pub const EMBEDDING_LENGTH: &str = "embedding_length";
/// `{arch}.block_count`.
pub const BLOCK_COUNT: &str = "block_count";
/// `{arch}.feed_forward_length`.
pub const FEED_FORWARD_LENGTH: &str = "feed_forward_length";
/// `{arch}.vocab_size`.
pub const VOCAB_SIZE: &str = "vocab_size";
/// `{arch}.expert_count`.
pub const EXPERT_COUNT: &str = "expert_count";
/// `{arch}.expert_used_count`: experts each token routes to.
pub const EXPERT_USED_COUNT: &str = "expert_used_count";
/// `{arch}.expert_feed_forward_length`: one expert's FFN width.
pub const EXPERT_FEED_FORWARD_LENGTH: &str = "expert_feed_forward_length";
/// `{arch}.expert_shared_feed_forward_length`: the shared expert's FFN width.
pub const EXPERT_SHARED_FEED_FORWARD_LENGTH: &str = "expert_shared_feed_forward_length";
/// `{arch}.expert_weights_scale`: multiplies the chosen experts' routing weights.
pub const EXPERT_WEIGHTS_SCALE: &str = "expert_weights_scale";
/// `{arch}.expert_gating_func`: 1 softmax, 2 sigmoid (llama.cpp's numbering).
pub const EXPERT_GATING_FUNC: &str = "expert_gating_func";
/// `{arch}.attention.head_count`.
pub const HEAD_COUNT: &str = "attention.head_count";
/// `{arch}.attention.head_count_kv`.
pub const HEAD_COUNT_KV: &str = "attention.head_count_kv";
/// `{arch}.attention.key_length`.
pub const KEY_LENGTH: &str = "attention.key_length";
/// `{arch}.attention.value_length`.
pub const VALUE_LENGTH: &str = "attention.value_length";
/// `{arch}.attention.layer_norm_rms_epsilon`.
pub const RMS_EPS: &str = "attention.layer_norm_rms_epsilon";
/// `{arch}.attention.layer_norm_epsilon`: the layer-norm epsilon (BERT).
pub const LAYER_NORM_EPS: &str = "attention.layer_norm_epsilon";
/// `{arch}.attention.sliding_window`.
pub const SLIDING_WINDOW: &str = "attention.sliding_window";
/// `{arch}.attention.sliding_window_pattern`.
pub const SLIDING_WINDOW_PATTERN: &str = "attention.sliding_window_pattern";
/// `{arch}.attention.scale`.
pub const ATTENTION_SCALE: &str = "attention.scale";
/// `{arch}.attn_logit_softcapping`.
pub const ATTN_LOGIT_SOFTCAP: &str = "attn_logit_softcapping";
/// `{arch}.final_logit_softcapping`.
pub const FINAL_LOGIT_SOFTCAP: &str = "final_logit_softcapping";
/// `{arch}.rope.freq_base`.
pub const ROPE_FREQ_BASE: &str = "rope.freq_base";
/// `{arch}.rope.freq_base_swa`: the rope base of sliding-window layers.
pub const ROPE_FREQ_BASE_SWA: &str = "rope.freq_base_swa";
/// `{arch}.rope.dimension_count`.
pub const ROPE_DIMENSION_COUNT: &str = "rope.dimension_count";
/// `{arch}.rope.scaling.type` (`none`, `linear`, `yarn`, `longrope`).
pub const ROPE_SCALING_TYPE: &str = "rope.scaling.type";
/// `{arch}.rope.scaling.factor`.
pub const ROPE_SCALING_FACTOR: &str = "rope.scaling.factor";
/// `{arch}.rope.scale_linear` (older files' linear factor).
pub const ROPE_SCALE_LINEAR: &str = "rope.scale_linear";
/// `{arch}.rope.scaling.original_context_length`.
pub const ROPE_SCALING_ORIG_CTX: &str = "rope.scaling.original_context_length";
/// `{arch}.rope.scaling.attn_factor`: multiplies the rotated dims (Phi-3's LongRoPE
/// attention factor; with YaRN it multiplies YaRN's own).
pub const ROPE_SCALING_ATTN_FACTOR: &str = "rope.scaling.attn_factor";
/// `{arch}.rope.scaling.yarn_attn_factor`: YaRN's attention factor where the model
/// names one (else `0.1·ln(factor) + 1`).
pub const ROPE_SCALING_YARN_ATTN_FACTOR: &str = "rope.scaling.yarn_attn_factor";
/// `{arch}.rope.scaling.yarn_beta_fast` (32 by default).
pub const ROPE_SCALING_YARN_BETA_FAST: &str = "rope.scaling.yarn_beta_fast";
/// `{arch}.rope.scaling.yarn_beta_slow` (1 by default).
pub const ROPE_SCALING_YARN_BETA_SLOW: &str = "rope.scaling.yarn_beta_slow";
/// `{arch}.rope.scaling.yarn_ext_factor` (1 by default).
pub const ROPE_SCALING_YARN_EXT_FACTOR: &str = "rope.scaling.yarn_ext_factor";
/// `{arch}.rope.scaling.yarn_log_multiplier` (DeepSeek's `mscale_all_dim`).
pub const ROPE_SCALING_YARN_LOG_MUL: &str = "rope.scaling.yarn_log_multiplier";
/// `{arch}.embedding_scale`: multiplies the token embedding (Granite).
pub const EMBEDDING_SCALE: &str = "embedding_scale";
/// `{arch}.residual_scale`: multiplies each block branch before its residual add
/// (Granite).
pub const RESIDUAL_SCALE: &str = "residual_scale";
/// `{arch}.logit_scale`: divides the logits (Granite).
pub const LOGIT_SCALE: &str = "logit_scale";

/// The architecture-specific key `{arch}.{suffix}` (`llama.block_count`).
pub fn arch_key(arch: &str, suffix: &str) -> String {
    format!("{arch}.{suffix}")
}
