//! `EngineArgs`: the flags every command that runs a model takes (threads, context, KV
//! type), turned into [`LoadOptions`].

use std::sync::Arc;

use anyhow::Context;
use tempra_llm::engine::{BackendKind, LoadOptions, Model};
use tempra_tensor::DType;

use crate::cli::model_arg::ModelArgs;

/// KV cache element types on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum KvType {
    /// Half precision (the default).
    F16,
    /// Single precision.
    F32,
    /// 8-bit blocks of 32 (34 bytes: 53% of f16).
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit blocks of 32 (18 bytes: 28% of f16).
    #[value(name = "q4_0")]
    Q4_0,
    /// 4-bit blocks of 32 with a minimum (20 bytes).
    #[value(name = "q4_1")]
    Q4_1,
    /// 5-bit blocks of 32 (22 bytes).
    #[value(name = "q5_0")]
    Q5_0,
    /// 5-bit blocks of 32 with a minimum (24 bytes).
    #[value(name = "q5_1")]
    Q5_1,
}

impl KvType {
    /// The dtype.
    pub(crate) fn dtype(self) -> DType {
        match self {
            KvType::F16 => DType::F16,
            KvType::F32 => DType::F32,
            KvType::Q8_0 => DType::Q8_0,
            KvType::Q4_0 => DType::Q4_0,
            KvType::Q4_1 => DType::Q4_1,
            KvType::Q5_0 => DType::Q5_0,
            KvType::Q5_1 => DType::Q5_1,
        }
    }
}

/// Where the model runs, on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendArg {
    /// The CPU (SIMD kernels, worker threads).
    Cpu,
    /// The GPU engine (wgpu; TEMPRA_GPU_ADAPTER=name picks the adapter).
    Gpu,
}

/// Model file plus engine settings.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EngineArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Context length (default: the model's, capped at 4096).
    #[arg(short = 'c', long = "ctx", value_name = "N")]
    pub(crate) ctx: Option<usize>,
    /// KV cache element type of keys and values (quantized types store each row in
    /// blocks of 32; attention reads them directly).
    #[arg(long = "kv-type", value_enum, default_value = "f16")]
    pub(crate) kv_type: KvType,
    /// The keys' element type, where it differs from --kv-type.
    #[arg(long = "kv-type-k", value_enum, value_name = "KV_TYPE")]
    pub(crate) kv_type_k: Option<KvType>,
    /// The values' element type, where it differs from --kv-type.
    #[arg(long = "kv-type-v", value_enum, value_name = "KV_TYPE")]
    pub(crate) kv_type_v: Option<KvType>,
    /// Where the model runs.
    #[arg(long, value_enum, default_value = "cpu")]
    pub(crate) backend: BackendArg,
    /// Keep the weights in the file's layout and mapping (by default the CPU copies
    /// Q4_0/Q8_0/Q4_K/Q5_K/Q6_K matrices at load into rows interleaved by eight, and
    /// F32/F16/BF16 matrices onto huge pages, for faster decode and prefill).
    #[arg(long = "no-repack")]
    pub(crate) no_repack: bool,
    /// Let CPU prefill take arithmetic faster than decode's (the blocked f32 GEMM for
    /// float and block-quantized weights, wider attention tiles): a prompt's logits then
    /// depend on how it was batched, chunked or served from the cache, so the same
    /// request can give different tokens. Off by default.
    #[arg(long = "fast-prefill")]
    pub(crate) fast_prefill: bool,
}

impl EngineArgs {
    /// Loads the model with these settings.
    pub(crate) fn load(&self) -> anyhow::Result<Arc<Model>> {
        self.load_for(1)
    }

    /// Loads the model for batched decode steps of up to `sessions` sessions.
    pub(crate) fn load_for(&self, sessions: usize) -> anyhow::Result<Arc<Model>> {
        let options = LoadOptions {
            tokenizer: self.model.tokenizer.clone(),
            threads: self.threads,
            context_length: self.ctx,
            kv_type: self.kv_type.dtype(),
            kv_type_k: self.kv_type_k.map(KvType::dtype),
            kv_type_v: self.kv_type_v.map(KvType::dtype),
            backend: match self.backend {
                BackendArg::Cpu => BackendKind::Cpu,
                BackendArg::Gpu => BackendKind::Gpu,
            },
            prepare_weights: !self.no_repack,
            arena: None,
            batch_sessions: sessions,
            fast_prefill: self.fast_prefill,
        };
        let file = self.model.open()?;
        Model::from_file(file, &options).with_context(|| self.model.model.display().to_string())
    }
}
