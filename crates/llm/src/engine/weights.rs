//! `ModelWeights`: every tensor of a transformer, looked up by GGUF name once at load.

use tempra_autograd::Var;
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{LlmError, Result};
use crate::model_config::{ModelConfig, MoeConfig, QkNormWidth, RopeScalingKind};
use crate::model_file::ModelFile;
use crate::tensor_names::{
    BlockTensor, GlobalTensor, block_bias, block_weight, global_bias, global_weight,
};

/// The weights of one transformer block. Optional tensors are present only for the
/// architectures that have them (biases: qwen2; q/k norms: qwen3, gemma3, olmo2;
/// sandwich norms: gemma2, gemma3; post-norms without pre-norms: olmo2). A file's fused
/// `attn_qkv` (phi3) gives `wq`, `wk` and `wv` as row views of it, and an `ffn_up` of
/// twice the FFN width without an `ffn_gate` (phi3) gives the dense FFN's `gate` (its
/// first half) and `up` (its second) the same way.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// Pre-attention norm (absent where the architecture has no pre-norms).
    pub attn_norm: Option<Var>,
    /// Query projection `[Hq·Dk, D]`.
    pub wq: Var,
    /// Key projection `[Hkv·Dk, D]`.
    pub wk: Var,
    /// Value projection `[Hkv·Dv, D]`.
    pub wv: Var,
    /// Output projection `[D, Hq·Dv]`.
    pub wo: Var,
    /// Output projection bias `[D]` (gpt-oss).
    pub bo: Option<Var>,
    /// Query bias.
    pub bq: Option<Var>,
    /// Key bias.
    pub bk: Option<Var>,
    /// Value bias.
    pub bv: Option<Var>,
    /// Query norm: per head `[Dk]`, or over the whole projection `[Hq·Dk]` (see
    /// [`QkNormWidth`]).
    pub q_norm: Option<Var>,
    /// Key norm: per head `[Dk]`, or over the whole projection `[Hkv·Dk]`.
    pub k_norm: Option<Var>,
    /// Norm of the attention output before the residual add.
    pub post_attn_norm: Option<Var>,
    /// Pre-FFN norm (absent where the architecture has no pre-norms).
    pub ffn_norm: Option<Var>,
    /// The feed-forward network: one FFN, or routed experts.
    pub ffn: FeedForward,
    /// Norm of the FFN output before the residual add.
    pub post_ffn_norm: Option<Var>,
    /// Attention sinks `[Hq]` (F32, gpt-oss): a constant of the attention op like the
    /// rope factors, kept where the file has it (on the host) and never trained.
    pub sinks: Option<Tensor>,
}

/// A block's feed-forward network.
// One per block, made once at load and never moved in a step: the variants' sizes do not
// matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum FeedForward {
    /// One FFN for every token.
    Dense(DenseFfn),
    /// A mixture of experts: each token's chosen experts (and a shared one, where the
    /// model has it).
    Experts(ExpertFfn),
}

/// One FFN: `down(act(gate·x) ⊙ up·x)`, or `down(act(up·x))` without a gate.
#[derive(Clone, Debug)]
pub struct DenseFfn {
    /// Gate `[F, D]` (absent in an encoder, whose FFN is ungated).
    pub gate: Option<Var>,
    /// Up `[F, D]`.
    pub up: Var,
    /// Down `[D, F]`.
    pub down: Var,
}

/// A mixture of experts' tensors, as GGUF stacks them (llama.cpp's `ffn_*_exps`).
#[derive(Clone, Debug)]
pub struct ExpertFfn {
    /// The router `[E, D]`: one logit per expert.
    pub router: Var,
    /// The experts' gates `[E, Fe, D]`.
    pub gate: Var,
    /// The experts' up projections `[E, Fe, D]`.
    pub up: Var,
    /// The experts' down projections `[E, D, Fe]`.
    pub down: Var,
    /// The shared expert every token goes through (Qwen2-MoE).
    pub shared: Option<DenseFfn>,
    /// The shared expert's gate `[1, D]`: its output times `sigmoid(gate·x)`.
    pub shared_gate: Option<Var>,
    /// The biases of the router `[E]`, the experts' gates and up projections `[E, Fe]`
    /// and their down projections `[E, D]` (gpt-oss).
    pub biases: Option<ExpertBiases>,
}

/// A mixture of experts' biases (gpt-oss has all four).
#[derive(Clone, Debug)]
pub struct ExpertBiases {
    /// Router bias `[E]`.
    pub router: Var,
    /// Each expert's gate bias `[E, Fe]`.
    pub gate: Var,
    /// Each expert's up bias `[E, Fe]`.
    pub up: Var,
    /// Each expert's down bias `[E, D]`.
    pub down: Var,
}

impl DenseFfn {
    /// The matrices, gate first.
    fn vars(&self) -> Vec<&Var> {
        let mut vars: Vec<&Var> = self.gate.iter().collect();
        vars.extend([&self.up, &self.down]);
        vars
    }

    /// [`Self::vars`], mutable.
    fn vars_mut(&mut self) -> Vec<&mut Var> {
        let mut vars: Vec<&mut Var> = self.gate.iter_mut().collect();
        vars.extend([&mut self.up, &mut self.down]);
        vars
    }
}

impl FeedForward {
    /// Every tensor, in a fixed order: each is a weight a product reads (`linear` or
    /// `expert_linear`).
    pub fn vars(&self) -> Vec<&Var> {
        match self {
            FeedForward::Dense(d) => d.vars(),
            FeedForward::Experts(e) => {
                let mut vars = vec![&e.router, &e.gate, &e.up, &e.down];
                vars.extend(e.shared.iter().flat_map(DenseFfn::vars));
                vars.extend(e.shared_gate.iter());
                vars
            }
        }
    }

    /// The biases (a mixture of experts' where it has them), in a fixed order: vectors
    /// and per-expert rows that products add, never a matrix a product reads.
    pub fn biases(&self) -> Vec<&Var> {
        match self {
            FeedForward::Experts(ExpertFfn {
                biases: Some(b), ..
            }) => vec![&b.router, &b.gate, &b.up, &b.down],
            _ => Vec::new(),
        }
    }

    /// [`Self::biases`], mutable.
    pub fn biases_mut(&mut self) -> Vec<&mut Var> {
        match self {
            FeedForward::Experts(ExpertFfn {
                biases: Some(b), ..
            }) => vec![&mut b.router, &mut b.gate, &mut b.up, &mut b.down],
            _ => Vec::new(),
        }
    }

    /// Every tensor, in [`Self::vars`]' order.
    pub fn vars_mut(&mut self) -> Vec<&mut Var> {
        match self {
            FeedForward::Dense(d) => d.vars_mut(),
            FeedForward::Experts(e) => {
                let mut vars = vec![&mut e.router, &mut e.gate, &mut e.up, &mut e.down];
                vars.extend(e.shared.iter_mut().flat_map(DenseFfn::vars_mut));
                vars.extend(e.shared_gate.iter_mut());
                vars
            }
        }
    }

    /// The dense FFN (an encoder's, or a dense decoder block's).
    pub fn dense(&self) -> Option<&DenseFfn> {
        match self {
            FeedForward::Dense(d) => Some(d),
            FeedForward::Experts(_) => None,
        }
    }

    /// The same FFN with every tensor (biases included) passed through `f`.
    fn try_map(&self, f: &mut impl FnMut(&Var) -> Result<Var>) -> Result<FeedForward> {
        let mut mapped = self.clone();
        for v in mapped.vars_mut() {
            let new = f(v)?;
            *v = new;
        }
        for v in mapped.biases_mut() {
            let new = f(v)?;
            *v = new;
        }
        Ok(mapped)
    }

    /// Reads block `l`'s experts: the router, the three stacks of `moe.expert_count`
    /// experts and, where the file has them, the shared expert and its gate. Every
    /// shape is checked (a missing or misshapen tensor is an error naming it).
    fn experts_from_file(
        file: &ModelFile,
        config: &ModelConfig,
        moe: &MoeConfig,
        l: usize,
    ) -> Result<FeedForward> {
        let d = config.embedding_length;
        let (e, fe) = (moe.expert_count, moe.expert_ffn_length);
        let w = |t: BlockTensor| block_weight(l, t);
        let get = |t: BlockTensor, dims: &[usize]| checked(file, w(t), dims).map(Var::constant);
        let shared = if file.has_tensor(&w(BlockTensor::FfnUpShexp)) {
            let fs = match moe.shared_ffn_length {
                Some(fs) => fs,
                None => file.tensor(&w(BlockTensor::FfnUpShexp))?.dims()[0],
            };
            Some(DenseFfn {
                gate: Some(get(BlockTensor::FfnGateShexp, &[fs, d])?),
                up: get(BlockTensor::FfnUpShexp, &[fs, d])?,
                down: get(BlockTensor::FfnDownShexp, &[d, fs])?,
            })
        } else if moe.shared_ffn_length.is_some() {
            return Err(LlmError::MissingTensor {
                name: w(BlockTensor::FfnUpShexp),
            });
        } else {
            None
        };
        // llama.cpp declares the shared gate `[D]`; its converter writes `[1, D]`.
        let shared_gate_name = w(BlockTensor::FfnGateInpShexp);
        let shared_gate = if file.has_tensor(&shared_gate_name) {
            let gate = file.tensor(&shared_gate_name)?;
            if gate.dims() != [d] && gate.dims() != [1, d] {
                return Err(LlmError::InvalidValue {
                    key: shared_gate_name,
                    what: format!("shape {:?}, expected [{d}] or [1, {d}]", gate.dims()),
                });
            }
            Some(Var::constant(gate.reshape(&[1, d])?))
        } else {
            None
        };
        // Biases: all four where the router has one (gpt-oss), else none.
        let bias = |t: BlockTensor, dims: &[usize]| {
            checked(file, block_bias(l, t), dims).map(Var::constant)
        };
        let biases = if file.has_tensor(&block_bias(l, BlockTensor::FfnGateInp)) {
            Some(ExpertBiases {
                router: bias(BlockTensor::FfnGateInp, &[e])?,
                gate: bias(BlockTensor::FfnGateExps, &[e, fe])?,
                up: bias(BlockTensor::FfnUpExps, &[e, fe])?,
                down: bias(BlockTensor::FfnDownExps, &[e, d])?,
            })
        } else {
            None
        };
        Ok(FeedForward::Experts(ExpertFfn {
            router: get(BlockTensor::FfnGateInp, &[e, d])?,
            gate: get(BlockTensor::FfnGateExps, &[e, fe, d])?,
            up: get(BlockTensor::FfnUpExps, &[e, fe, d])?,
            down: get(BlockTensor::FfnDownExps, &[e, d, fe])?,
            shared,
            shared_gate,
            biases,
        }))
    }
}

/// All weights of a model, as constants (inference) or variables (training).
#[derive(Clone, Debug)]
pub struct ModelWeights {
    /// Token embedding `[V, D]`.
    pub token_embd: Var,
    /// Final norm (absent in an encoder).
    pub output_norm: Option<Var>,
    /// Output head `[V, D]`; `None` when tied to the token embedding.
    pub output: Option<Var>,
    /// The per-pair rope frequency factors `[rotary_dims/2]` the forward applies:
    /// Llama 3's `rope_freqs`, or one of LongRoPE's two (see
    /// [`ModelWeights::select_rope_factors`]).
    pub rope_freqs: Option<Tensor>,
    /// LongRoPE's factors for contexts past the original one (`rope_factors_long`).
    pub rope_factors_long: Option<Tensor>,
    /// LongRoPE's factors within the original context (`rope_factors_short`).
    pub rope_factors_short: Option<Tensor>,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
    /// An encoder's own tensors (BERT).
    pub encoder: Option<EncoderWeights>,
}

/// The tensors of an encoder (BERT) beyond [`ModelWeights`]' common ones: learned
/// positions, token types, the embeddings' layer norm, and per block the output and FFN
/// biases and the two layer norms after the residual adds.
#[derive(Clone, Debug)]
pub struct EncoderWeights {
    /// Position embeddings `[context, D]`.
    pub position_embd: Var,
    /// Token-type embeddings `[types, D]` (every token is type 0).
    pub token_types: Var,
    /// The embeddings' layer norm: weight and bias `[D]`.
    pub embd_norm: (Var, Var),
    /// Per block.
    pub layers: Vec<EncoderLayerWeights>,
}

/// One encoder block's tensors beyond [`LayerWeights`]' (whose `gate` it does not have).
#[derive(Clone, Debug)]
pub struct EncoderLayerWeights {
    /// Attention output bias `[D]`.
    pub bo: Var,
    /// FFN up bias `[F]`.
    pub up_bias: Var,
    /// FFN down bias `[D]`.
    pub down_bias: Var,
    /// Layer norm after the attention's residual add: weight and bias `[D]`.
    pub attn_out_norm: (Var, Var),
    /// Layer norm after the FFN's residual add: weight and bias `[D]`.
    pub layer_out_norm: (Var, Var),
}

impl EncoderWeights {
    /// Every tensor, in [`Self::vars_mut`]'s order.
    fn vars(&self) -> Vec<&Var> {
        let mut vars = vec![
            &self.position_embd,
            &self.token_types,
            &self.embd_norm.0,
            &self.embd_norm.1,
        ];
        for l in &self.layers {
            vars.extend([
                &l.bo,
                &l.up_bias,
                &l.down_bias,
                &l.attn_out_norm.0,
                &l.attn_out_norm.1,
                &l.layer_out_norm.0,
                &l.layer_out_norm.1,
            ]);
        }
        vars
    }

    /// Every tensor, in a fixed order.
    fn vars_mut(&mut self) -> Vec<&mut Var> {
        let mut vars = vec![
            &mut self.position_embd,
            &mut self.token_types,
            &mut self.embd_norm.0,
            &mut self.embd_norm.1,
        ];
        for l in &mut self.layers {
            vars.extend([
                &mut l.bo,
                &mut l.up_bias,
                &mut l.down_bias,
                &mut l.attn_out_norm.0,
                &mut l.attn_out_norm.1,
                &mut l.layer_out_norm.0,
                &mut l.layer_out_norm.1,
            ]);
        }
        vars
    }

    /// Reads an encoder's tensors from `file`.
    fn from_file(file: &ModelFile, config: &ModelConfig) -> Result<EncoderWeights> {
        let d = config.embedding_length;
        let f = config.feed_forward_length;
        let get = |name: String, dims: &[usize]| -> Result<Var> {
            checked(file, name, dims).map(Var::constant)
        };
        let types_name = global_weight(GlobalTensor::TokenTypes);
        let types = file
            .tensor(&types_name)?
            .dims()
            .first()
            .copied()
            .unwrap_or(0);
        let norm =
            |w: String, b: String| -> Result<(Var, Var)> { Ok((get(w, &[d])?, get(b, &[d])?)) };
        let layers = (0..config.block_count)
            .map(|l| {
                let block_norm = |t| norm(block_weight(l, t), block_bias(l, t));
                Ok(EncoderLayerWeights {
                    bo: get(block_bias(l, BlockTensor::AttnOutput), &[d])?,
                    up_bias: get(block_bias(l, BlockTensor::FfnUp), &[f])?,
                    down_bias: get(block_bias(l, BlockTensor::FfnDown), &[d])?,
                    attn_out_norm: block_norm(BlockTensor::AttnOutputNorm)?,
                    layer_out_norm: block_norm(BlockTensor::LayerOutputNorm)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EncoderWeights {
            position_embd: get(
                global_weight(GlobalTensor::PositionEmbd),
                &[config.context_length, d],
            )?,
            token_types: get(types_name, &[types.max(1), d])?,
            embd_norm: norm(
                global_weight(GlobalTensor::TokenEmbdNorm),
                global_bias(GlobalTensor::TokenEmbdNorm),
            )?,
            layers,
        })
    }
}

impl ModelWeights {
    /// Looks every tensor up in `file` (zero-copy views of the mapping) and checks its
    /// shape against `config`. LongRoPE's factors are chosen for the model's training
    /// context; a loader that runs another context calls
    /// [`Self::select_rope_factors`].
    pub fn from_file(file: &ModelFile, config: &ModelConfig) -> Result<ModelWeights> {
        let d = config.embedding_length;
        let (hq, hkv) = (config.head_count, config.head_count_kv);
        let (dk, dv) = (config.key_length, config.value_length);
        let f = config.feed_forward_length;
        let description = config.arch.description();
        let get = |name: String, dims: &[usize]| -> Result<Var> {
            checked(file, name, dims).map(Var::constant)
        };
        let opt = |name: String, dims: &[usize]| -> Result<Option<Var>> {
            if file.has_tensor(&name) {
                get(name, dims).map(Some)
            } else {
                Ok(None)
            }
        };
        // Tensors the architecture always or never has: a missing one is an error
        // naming it, one it never has is not read.
        let when = |present: bool, name: String, dims: &[usize]| -> Result<Option<Var>> {
            if present {
                get(name, dims).map(Some)
            } else {
                Ok(None)
            }
        };
        let post_norm = |l: usize, t: BlockTensor| -> Result<Option<Var>> {
            if description.pre_norms || description.encoder {
                opt(block_weight(l, t), &[d])
            } else {
                get(block_weight(l, t), &[d]).map(Some)
            }
        };
        let (q_norm_width, k_norm_width) = match description.qk_norm {
            QkNormWidth::PerHead => (dk, dk),
            QkNormWidth::Full => (hq * dk, hkv * dk),
        };
        let mut layers = Vec::with_capacity(config.block_count);
        for l in 0..config.block_count {
            let w = |t: BlockTensor| block_weight(l, t);
            let pre = description.pre_norms;
            let (wq, wk, wv) = if file.has_tensor(&w(BlockTensor::AttnQkv)) {
                let qkv = get(w(BlockTensor::AttnQkv), &[hq * dk + hkv * (dk + dv), d])?;
                let [q, k, v] = split_rows(&qkv, [hq * dk, hkv * dk, hkv * dv])?;
                (q, k, v)
            } else {
                (
                    get(w(BlockTensor::AttnQ), &[hq * dk, d])?,
                    get(w(BlockTensor::AttnK), &[hkv * dk, d])?,
                    get(w(BlockTensor::AttnV), &[hkv * dv, d])?,
                )
            };
            let ffn = if let Some(moe) = &config.moe {
                FeedForward::experts_from_file(file, config, moe, l)?
            } else {
                let (gate, up) = if description.encoder {
                    (None, get(w(BlockTensor::FfnUp), &[f, d])?)
                } else if file.has_tensor(&w(BlockTensor::FfnGate)) {
                    (
                        Some(get(w(BlockTensor::FfnGate), &[f, d])?),
                        get(w(BlockTensor::FfnUp), &[f, d])?,
                    )
                } else {
                    let gate_up = get(w(BlockTensor::FfnUp), &[2 * f, d])?;
                    let [gate, up] = split_rows(&gate_up, [f, f])?;
                    (Some(gate), up)
                };
                let down = get(w(BlockTensor::FfnDown), &[d, f])?;
                FeedForward::Dense(DenseFfn { gate, up, down })
            };
            let sinks_name = w(BlockTensor::AttnSinks);
            let sinks = if file.has_tensor(&sinks_name) {
                let sinks = checked(file, sinks_name.clone(), &[hq])?;
                if sinks.dtype() != DType::F32 {
                    return Err(LlmError::InvalidValue {
                        key: sinks_name,
                        what: format!("dtype {}, expected f32", sinks.dtype()),
                    });
                }
                Some(sinks)
            } else {
                None
            };
            // gpt-oss's pre-FFN norm is its `post_attention_norm`: no post-norm then.
            let ffn_norm_tensor = description.ffn_norm;
            let post_attn_norm = if ffn_norm_tensor == BlockTensor::PostAttentionNorm {
                None
            } else {
                post_norm(l, BlockTensor::PostAttentionNorm)?
            };
            layers.push(LayerWeights {
                attn_norm: when(pre, w(BlockTensor::AttnNorm), &[d])?,
                wq,
                wk,
                wv,
                wo: get(w(BlockTensor::AttnOutput), &[d, hq * dv])?,
                bo: opt(block_bias(l, BlockTensor::AttnOutput), &[d])?,
                sinks,
                bq: opt(block_bias(l, BlockTensor::AttnQ), &[hq * dk])?,
                bk: opt(block_bias(l, BlockTensor::AttnK), &[hkv * dk])?,
                bv: opt(block_bias(l, BlockTensor::AttnV), &[hkv * dv])?,
                q_norm: opt(w(BlockTensor::AttnQNorm), &[q_norm_width])?,
                k_norm: opt(w(BlockTensor::AttnKNorm), &[k_norm_width])?,
                post_attn_norm,
                ffn_norm: when(pre, w(ffn_norm_tensor), &[d])?,
                ffn,
                post_ffn_norm: post_norm(l, BlockTensor::PostFfwNorm)?,
            });
        }
        let vocab = config.vocab_size;
        let pairs = [config.rope.dimension_count / 2];
        let factors = |t: GlobalTensor| -> Result<Option<Tensor>> {
            let name = global_weight(t);
            if file.has_tensor(&name) {
                checked(file, name, &pairs).map(Some)
            } else {
                Ok(None)
            }
        };
        let rope_freqs = factors(GlobalTensor::RopeFreqs)?;
        // A file's `rope_freqs` wins over LongRoPE factors, as in llama.cpp.
        let (rope_factors_long, rope_factors_short) = if rope_freqs.is_some() {
            (None, None)
        } else {
            (
                factors(GlobalTensor::RopeFactorsLong)?,
                factors(GlobalTensor::RopeFactorsShort)?,
            )
        };
        if config.rope.scaling == RopeScalingKind::LongRope && rope_freqs.is_none() {
            for (t, present) in [
                (GlobalTensor::RopeFactorsLong, rope_factors_long.is_some()),
                (GlobalTensor::RopeFactorsShort, rope_factors_short.is_some()),
            ] {
                if !present {
                    return Err(LlmError::MissingTensor {
                        name: global_weight(t),
                    });
                }
            }
        }
        let mut weights = ModelWeights {
            token_embd: get(global_weight(GlobalTensor::TokenEmbd), &[vocab, d])?,
            output_norm: when(
                !description.encoder,
                global_weight(GlobalTensor::OutputNorm),
                &[d],
            )?,
            output: opt(global_weight(GlobalTensor::Output), &[vocab, d])?,
            rope_freqs,
            rope_factors_long,
            rope_factors_short,
            layers,
            encoder: if description.encoder {
                Some(EncoderWeights::from_file(file, config)?)
            } else {
                None
            },
        };
        weights.select_rope_factors(config.context_length, config);
        Ok(weights)
    }

    /// Points [`Self::rope_freqs`] at LongRoPE's long factors when sessions of
    /// `context_length` positions run past the model's original context, else at the
    /// short ones (llama.cpp's choice, by the context rather than by each position).
    /// A model with Llama 3's `rope_freqs` or without LongRoPE factors is unchanged.
    pub fn select_rope_factors(&mut self, context_length: usize, config: &ModelConfig) {
        let long = context_length > config.rope.original_context_length;
        let chosen = if long {
            &self.rope_factors_long
        } else {
            &self.rope_factors_short
        };
        if let Some(factors) = chosen {
            self.rope_freqs = Some(factors.clone());
        }
    }

    /// The same weights with every tensor passed through `f` (e.g. dequantized, or made
    /// trainable variables); the rope frequency factors are kept as they are.
    pub fn map(&self, mut f: impl FnMut(&Var) -> Result<Var>) -> Result<ModelWeights> {
        fn opt(v: &Option<Var>, f: &mut impl FnMut(&Var) -> Result<Var>) -> Result<Option<Var>> {
            v.as_ref().map(f).transpose()
        }
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            layers.push(LayerWeights {
                attn_norm: opt(&l.attn_norm, &mut f)?,
                wq: f(&l.wq)?,
                wk: f(&l.wk)?,
                wv: f(&l.wv)?,
                wo: f(&l.wo)?,
                bo: opt(&l.bo, &mut f)?,
                sinks: l.sinks.clone(),
                bq: opt(&l.bq, &mut f)?,
                bk: opt(&l.bk, &mut f)?,
                bv: opt(&l.bv, &mut f)?,
                q_norm: opt(&l.q_norm, &mut f)?,
                k_norm: opt(&l.k_norm, &mut f)?,
                post_attn_norm: opt(&l.post_attn_norm, &mut f)?,
                ffn_norm: opt(&l.ffn_norm, &mut f)?,
                ffn: l.ffn.try_map(&mut f)?,
                post_ffn_norm: opt(&l.post_ffn_norm, &mut f)?,
            });
        }
        Ok(ModelWeights {
            token_embd: f(&self.token_embd)?,
            output_norm: opt(&self.output_norm, &mut f)?,
            output: opt(&self.output, &mut f)?,
            rope_freqs: self.rope_freqs.clone(),
            rope_factors_long: self.rope_factors_long.clone(),
            rope_factors_short: self.rope_factors_short.clone(),
            layers,
            encoder: match &self.encoder {
                Some(e) => {
                    let mut e = e.clone();
                    for v in e.vars_mut() {
                        *v = f(v)?;
                    }
                    Some(e)
                }
                None => None,
            },
        })
    }

    /// Calls `f` on every weight in place, in [`Self::map`]'s order (the rope factors
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
                bo,
                sinks: _,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                post_attn_norm,
                ffn_norm,
                ffn,
                post_ffn_norm,
            } = l;
            if let Some(v) = attn_norm {
                f(v);
            }
            for v in [wq, wk, wv, wo] {
                f(v);
            }
            for v in [bo, bq, bk, bv, q_norm, k_norm, post_attn_norm, ffn_norm]
                .into_iter()
                .flatten()
            {
                f(v);
            }
            for v in ffn.vars_mut() {
                f(v);
            }
            for v in ffn.biases_mut() {
                f(v);
            }
            if let Some(v) = post_ffn_norm {
                f(v);
            }
        }
        f(&mut self.token_embd);
        if let Some(v) = &mut self.output_norm {
            f(v);
        }
        if let Some(v) = &mut self.output {
            f(v);
        }
        if let Some(e) = &mut self.encoder {
            for v in e.vars_mut() {
                f(v);
            }
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
            let mut ffn = l.ffn.clone();
            for v in ffn.vars_mut() {
                let new = prepare(v)?;
                *v = new;
            }
            layers.push(LayerWeights {
                wq: prepare(&l.wq)?,
                wk: prepare(&l.wk)?,
                wv: prepare(&l.wv)?,
                wo: prepare(&l.wo)?,
                ffn,
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

    /// Bytes of weight data (each tensor's bytes; views split from a fused matrix count
    /// their own rows).
    pub fn bytes(&self) -> usize {
        let mut total = 0;
        let mut add = |v: &Var| total += own_bytes(v.tensor());
        add(&self.token_embd);
        if let Some(o) = &self.output_norm {
            add(o);
        }
        if let Some(o) = &self.output {
            add(o);
        }
        if let Some(e) = &self.encoder {
            for v in e.vars() {
                add(v);
            }
        }
        for l in &self.layers {
            for v in [&l.wq, &l.wk, &l.wv, &l.wo]
                .into_iter()
                .chain(l.ffn.vars())
                .chain(l.ffn.biases())
            {
                add(v);
            }
            for v in [
                &l.bo,
                &l.attn_norm,
                &l.ffn_norm,
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
        let sinks: usize = self
            .layers
            .iter()
            .filter_map(|l| l.sinks.as_ref())
            .map(own_bytes)
            .sum();
        total + sinks
    }
}

impl ModelWeights {
    /// Bytes of weight data one decoded token reads: [`Self::bytes`] with each expert
    /// stack counted for the `experts_used` of its experts a token routes to (every
    /// weight of a dense model).
    pub fn active_bytes(&self, experts_used: usize) -> usize {
        let mut unused = 0.0;
        for l in &self.layers {
            if let FeedForward::Experts(e) = &l.ffn {
                for stack in [&e.gate, &e.up, &e.down] {
                    let experts = stack.dims()[0].max(1);
                    let idle = experts.saturating_sub(experts_used) as f64 / experts as f64;
                    unused += own_bytes(stack.tensor()) as f64 * idle;
                }
            }
        }
        self.bytes() - unused.round() as usize
    }
}

/// The bytes `t`'s layout addresses from its first unit (a view's, not its storage's).
fn own_bytes(t: &Tensor) -> usize {
    let layout = t.layout();
    layout.bytes_spanned() - layout.offset() * layout.dtype().block_bytes()
}

/// The tensor `name` of `file`, checked to have `dims`.
fn checked(file: &ModelFile, name: String, dims: &[usize]) -> Result<Tensor> {
    let t = file.tensor(&name)?;
    if t.dims() != dims {
        return Err(LlmError::InvalidValue {
            key: name,
            what: format!("shape {:?}, expected {dims:?}", t.dims()),
        });
    }
    Ok(t)
}

/// Consecutive row ranges of `fused [N, D]` of `rows` rows each, as zero-copy views (a
/// fused q/k/v or gate/up matrix).
fn split_rows<const P: usize>(fused: &Var, rows: [usize; P]) -> Result<[Var; P]> {
    let t = fused.tensor();
    let mut parts = Vec::with_capacity(P);
    let mut start = 0;
    for n in rows {
        parts.push(Var::constant(t.narrow(0, start, n)?));
        start += n;
    }
    parts.try_into().map_err(|_| LlmError::Argument {
        what: "split_rows: part count".into(),
    })
}
