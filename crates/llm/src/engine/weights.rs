//! `ModelWeights`: every tensor of a transformer, looked up by GGUF name once at load.

use tempra_autograd::Var;
use tempra_tensor::{ExecContext, Tensor};

use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;
use crate::model_file::ModelFile;
use crate::tensor_names::{BlockTensor, GlobalTensor, block_bias, block_weight, global_weight};

/// The weights of one transformer block. Optional tensors are present only for the
/// architectures that have them (biases: qwen2; q/k norms: qwen3, gemma3; sandwich
/// norms: gemma2, gemma3).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// Pre-attention norm.
    pub attn_norm: Var,
    /// Query projection `[Hq·Dk, D]`.
    pub wq: Var,
    /// Key projection `[Hkv·Dk, D]`.
    pub wk: Var,
    /// Value projection `[Hkv·Dv, D]`.
    pub wv: Var,
    /// Output projection `[D, Hq·Dv]`.
    pub wo: Var,
    /// Query bias.
    pub bq: Option<Var>,
    /// Key bias.
    pub bk: Option<Var>,
    /// Value bias.
    pub bv: Option<Var>,
    /// Per-head query norm `[Dk]`.
    pub q_norm: Option<Var>,
    /// Per-head key norm `[Dk]`.
    pub k_norm: Option<Var>,
    /// Norm of the attention output before the residual add.
    pub post_attn_norm: Option<Var>,
    /// Pre-FFN norm.
    pub ffn_norm: Var,
    /// FFN gate `[F, D]`.
    pub gate: Var,
    /// FFN up `[F, D]`.
    pub up: Var,
    /// FFN down `[D, F]`.
    pub down: Var,
    /// Norm of the FFN output before the residual add.
    pub post_ffn_norm: Option<Var>,
}

/// All weights of a model, as constants (inference) or variables (training).
#[derive(Clone, Debug)]
pub struct ModelWeights {
    /// Token embedding `[V, D]`.
    pub token_embd: Var,
    /// Final norm.
    pub output_norm: Var,
    /// Output head `[V, D]`; `None` when tied to the token embedding.
    pub output: Option<Var>,
    /// Llama 3 rope frequency factors `[rotary_dims/2]`.
    pub rope_freqs: Option<Tensor>,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
}

impl ModelWeights {
    /// Looks every tensor up in `file` (zero-copy views of the mapping) and checks its
    /// shape against `config`.
    pub fn from_file(file: &ModelFile, config: &ModelConfig) -> Result<ModelWeights> {
        let d = config.embedding_length;
        let (hq, hkv) = (config.head_count, config.head_count_kv);
        let (dk, dv) = (config.key_length, config.value_length);
        let f = config.feed_forward_length;
        let get = |name: String, dims: &[usize]| -> Result<Var> {
            let t = file.tensor(&name)?;
            if t.dims() != dims {
                return Err(LlmError::InvalidValue {
                    key: name,
                    what: format!("shape {:?}, expected {dims:?}", t.dims()),
                });
            }
            Ok(Var::constant(t))
        };
        let opt = |name: String, dims: &[usize]| -> Result<Option<Var>> {
            if file.has_tensor(&name) {
                get(name, dims).map(Some)
            } else {
                Ok(None)
            }
        };
        let mut layers = Vec::with_capacity(config.block_count);
        for l in 0..config.block_count {
            let w = |t: BlockTensor| block_weight(l, t);
            layers.push(LayerWeights {
                attn_norm: get(w(BlockTensor::AttnNorm), &[d])?,
                wq: get(w(BlockTensor::AttnQ), &[hq * dk, d])?,
                wk: get(w(BlockTensor::AttnK), &[hkv * dk, d])?,
                wv: get(w(BlockTensor::AttnV), &[hkv * dv, d])?,
                wo: get(w(BlockTensor::AttnOutput), &[d, hq * dv])?,
                bq: opt(block_bias(l, BlockTensor::AttnQ), &[hq * dk])?,
                bk: opt(block_bias(l, BlockTensor::AttnK), &[hkv * dk])?,
                bv: opt(block_bias(l, BlockTensor::AttnV), &[hkv * dv])?,
                q_norm: opt(w(BlockTensor::AttnQNorm), &[dk])?,
                k_norm: opt(w(BlockTensor::AttnKNorm), &[dk])?,
                post_attn_norm: opt(w(BlockTensor::PostAttentionNorm), &[d])?,
                ffn_norm: get(w(BlockTensor::FfnNorm), &[d])?,
                gate: get(w(BlockTensor::FfnGate), &[f, d])?,
                up: get(w(BlockTensor::FfnUp), &[f, d])?,
                down: get(w(BlockTensor::FfnDown), &[d, f])?,
                post_ffn_norm: opt(w(BlockTensor::PostFfwNorm), &[d])?,
            });
        }
        let vocab = config.vocab_size;
        let rope_freqs_name = global_weight(GlobalTensor::RopeFreqs);
        let rope_freqs = if file.has_tensor(&rope_freqs_name) {
            let t = file.tensor(&rope_freqs_name)?;
            if t.dims() != [config.rope.dimension_count / 2] {
                return Err(LlmError::InvalidValue {
                    key: rope_freqs_name,
                    what: format!(
                        "shape {:?}, expected [{}]",
                        t.dims(),
                        config.rope.dimension_count / 2
                    ),
                });
            }
            Some(t)
        } else {
            None
        };
        Ok(ModelWeights {
            token_embd: get(global_weight(GlobalTensor::TokenEmbd), &[vocab, d])?,
            output_norm: get(global_weight(GlobalTensor::OutputNorm), &[d])?,
            output: opt(global_weight(GlobalTensor::Output), &[vocab, d])?,
            rope_freqs,
            layers,
        })
    }

    /// The same weights with every tensor passed through `f` (e.g. dequantized, or made
    /// trainable variables); `rope_freqs` is kept as it is.
    pub fn map(&self, mut f: impl FnMut(&Var) -> Result<Var>) -> Result<ModelWeights> {
        fn opt(v: &Option<Var>, f: &mut impl FnMut(&Var) -> Result<Var>) -> Result<Option<Var>> {
            v.as_ref().map(f).transpose()
        }
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            layers.push(LayerWeights {
                attn_norm: f(&l.attn_norm)?,
                wq: f(&l.wq)?,
                wk: f(&l.wk)?,
                wv: f(&l.wv)?,
                wo: f(&l.wo)?,
                bq: opt(&l.bq, &mut f)?,
                bk: opt(&l.bk, &mut f)?,
                bv: opt(&l.bv, &mut f)?,
                q_norm: opt(&l.q_norm, &mut f)?,
                k_norm: opt(&l.k_norm, &mut f)?,
                post_attn_norm: opt(&l.post_attn_norm, &mut f)?,
                ffn_norm: f(&l.ffn_norm)?,
                gate: f(&l.gate)?,
                up: f(&l.up)?,
                down: f(&l.down)?,
                post_ffn_norm: opt(&l.post_ffn_norm, &mut f)?,
            });
        }
        Ok(ModelWeights {
            token_embd: f(&self.token_embd)?,
            output_norm: f(&self.output_norm)?,
            output: opt(&self.output, &mut f)?,
            rope_freqs: self.rope_freqs.clone(),
            layers,
        })
    }

    /// Calls `f` on every weight in place, in [`Self::map`]'s order (`rope_freqs`
    /// excepted): a training loop that swaps in its parameters' current variables each
    /// step without building a new `ModelWeights`.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut Var)) {
        for l in &mut self.layers {
            let LayerWeights {
                attn_norm,
                wq,
                wk,
                wv,
                wo,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                post_attn_norm,
                ffn_norm,
                gate,
                up,
                down,
                post_ffn_norm,
            } = l;
            for v in [attn_norm, wq, wk, wv, wo] {
                f(v);
            }
            for v in [bq, bk, bv, q_norm, k_norm, post_attn_norm]
                .into_iter()
                .flatten()
            {
                f(v);
            }
            for v in [ffn_norm, gate, up, down] {
                f(v);
            }
            if let Some(v) = post_ffn_norm {
                f(v);
            }
        }
        f(&mut self.token_embd);
        f(&mut self.output_norm);
        if let Some(v) = &mut self.output {
            f(v);
        }
    }

    /// The same weights with the matrices only `linear` reads (attention and FFN
    /// projections, an untied output head) in the layout `ctx`'s backend multiplies
    /// fastest ([`ExecContext::prepare_weight`]: on the CPU, Q4_0, Q8_0, Q4_K, Q5_K and
    /// Q6_K rows interleaved by eight, float matrices copied onto huge pages), or `None`
    /// when the backend keeps every one as it is. The
    /// token embedding and norms are shared, untouched. `replaced` is called with each
    /// original right after its copy is made (the loader lets the original's file pages
    /// go there, so no more than one weight is resident twice at any time).
    pub fn prepare_for_linear(
        &self,
        ctx: &ExecContext,
        mut replaced: impl FnMut(&Tensor),
    ) -> Result<Option<ModelWeights>> {
        let mut changed = false;
        let mut prepare = |v: &Var| -> Result<Var> {
            Ok(match ctx.prepare_weight(v.tensor())? {
                Some(t) => {
                    changed = true;
                    replaced(v.tensor());
                    Var::constant(t)
                }
                None => v.clone(),
            })
        };
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            layers.push(LayerWeights {
                wq: prepare(&l.wq)?,
                wk: prepare(&l.wk)?,
                wv: prepare(&l.wv)?,
                wo: prepare(&l.wo)?,
                gate: prepare(&l.gate)?,
                up: prepare(&l.up)?,
                down: prepare(&l.down)?,
                ..l.clone()
            });
        }
        let output = self.output.as_ref().map(&mut prepare).transpose()?;
        let prepared = ModelWeights {
            output,
            layers,
            ..self.clone()
        };
        Ok(changed.then_some(prepared))
    }

    /// The output head (the token embedding when tied).
    pub fn head(&self) -> &Var {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Bytes of weight data (each tensor's spanned bytes).
    pub fn bytes(&self) -> usize {
        let mut total = 0;
        let mut add = |v: &Var| total += v.tensor().layout().bytes_spanned();
        add(&self.token_embd);
        add(&self.output_norm);
        if let Some(o) = &self.output {
            add(o);
        }
        for l in &self.layers {
            for v in [
                &l.attn_norm,
                &l.wq,
                &l.wk,
                &l.wv,
                &l.wo,
                &l.ffn_norm,
                &l.gate,
                &l.up,
                &l.down,
            ] {
                add(v);
            }
            for v in [
                &l.bq,
                &l.bk,
                &l.bv,
                &l.q_norm,
                &l.k_norm,
                &l.post_attn_norm,
                &l.post_ffn_norm,
            ]
            .into_iter()
            .flatten()
            {
                add(v);
            }
        }
        total
    }
}
