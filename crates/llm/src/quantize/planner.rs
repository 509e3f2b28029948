//! `TensorTypePlanner`: which dtype each tensor gets, following llama.cpp's
//! `llama_model_quantize_impl` (what is quantized at all) and `llama_tensor_get_type`
//! (the per-tensor mixes of the `_m` and IQ4 types and the fallbacks for odd row
//! lengths), as in the llama.cpp of llama-cpp-python 0.3.36 (`src/llama-quant.cpp`).

use tempra_tensor::DType;

use super::QuantType;
use crate::gguf::{Metadata, TensorSpec, keys};

/// What the planner decided for one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    /// The tensor name.
    pub name: String,
    /// Its dtype in the source.
    pub from: DType,
    /// Its dtype in the output (equal to `from` when copied unchanged).
    pub to: DType,
    /// Whether the mix's choice did not fit the row length and a fallback was used.
    pub fallback: bool,
}

/// The model facts the mixes depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MixFacts {
    n_layer: usize,
    n_gqa: usize,
    n_expert: usize,
    is_70b: bool,
    has_output: bool,
    n_attention_wv: usize,
}

/// Chooses each tensor's output dtype. Call [`TensorTypePlanner::plan`] once per
/// tensor, in file order: like llama.cpp, the `attn_v`/`ffn_down` choices depend on how
/// many of them came before.
///
/// Rules (llama.cpp's, for the types tempra writes):
/// - only tensors named `*weight` with at least 2 non-trivial dims are quantized, never
///   norms (`*_norm.weight`), MoE routers (`ffn_gate_inp`) or position embeddings;
///   everything else (1-D tensors: norms, biases) is copied unchanged;
/// - block types: `output.weight` (or `token_embd.weight` when there is no output
///   tensor) gets Q6_K (Q8_0 when its rows are not a multiple of 256), except for Q8_0;
/// - Q2_K: `attn_v` Q4_K with GQA ≥ 4 else Q3_K; `ffn_down` and `attn_output` Q3_K;
/// - Q3_K_M: the first two `attn_v` Q5_K, the rest Q4_K; `ffn_down` Q5_K in the first
///   1/16 of layers, else Q4_K; `attn_output` Q4_K;
/// - Q4_K_M / Q5_K_M: `attn_v` and `ffn_down` get Q6_K in the first and last 1/8 of the
///   layers and every third layer between (`use_more_bits`);
/// - IQ4_NL / IQ4_XS (no importance matrix): `attn_v` Q5_K with GQA ≥ 4, `ffn_down`
///   Q5_K in the first 1/8 of the layers;
/// - a row length the chosen type's block does not divide falls back: Q4_K → Q5_0,
///   Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K → Q4_0, IQ4_XS → IQ4_NL, then F16 if the
///   fallback's 32-block does not divide either.
#[derive(Clone, Debug)]
pub struct TensorTypePlanner {
    qtype: QuantType,
    facts: MixFacts,
    i_attention_wv: usize,
    i_ffn_down: usize,
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers and every
/// third layer between.
fn use_more_bits(i_layer: usize, n_layers: usize) -> bool {
    let (i, n) = (i_layer as i64, n_layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// ggml's `ggml_n_dims`: dims up to the last one (innermost first) larger than 1.
fn ggml_n_dims(spec: &TensorSpec) -> usize {
    let ne = spec.gguf_dims();
    ne.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1)
}

impl TensorTypePlanner {
    /// A planner for `qtype` over a model with this metadata and these tensors.
    pub fn new(qtype: QuantType, metadata: &Metadata, tensors: &[TensorSpec]) -> Self {
        let arch = metadata.get_str(keys::GENERAL_ARCHITECTURE).unwrap_or("");
        let get = |suffix: &str| {
            metadata
                .opt_usize(&keys::arch_key(arch, suffix))
                .ok()
                .flatten()
        };
        let layers_in_names = tensors
            .iter()
            .filter_map(|t| crate::tensor_names::TensorName::parse(&t.name)?.layer())
            .max()
            .map_or(0, |l| l + 1);
        let n_layer = get(keys::BLOCK_COUNT).unwrap_or(layers_in_names);
        let n_head = get(keys::HEAD_COUNT).unwrap_or(1).max(1);
        let n_head_kv = get(keys::HEAD_COUNT_KV).unwrap_or(n_head).max(1);
        let facts = MixFacts {
            n_layer,
            n_gqa: n_head / n_head_kv,
            n_expert: get(keys::EXPERT_COUNT).unwrap_or(0),
            is_70b: arch == "llama" && n_layer == 80 && n_head != n_head_kv,
            has_output: tensors.iter().any(|t| t.name == "output.weight"),
            n_attention_wv: tensors
                .iter()
                .filter(|t| {
                    ["attn_v.weight", "attn_qkv.weight", "attn_kv_b.weight"]
                        .iter()
                        .any(|s| t.name.contains(s))
                })
                .count(),
        };
        Self {
            qtype,
            facts,
            i_attention_wv: 0,
            i_ffn_down: 0,
        }
    }

    /// The plan for the next tensor (in file order).
    pub fn plan(&mut self, spec: &TensorSpec) -> TensorPlan {
        let name = spec.name.as_str();
        let quantize = name.ends_with("weight")
            && ggml_n_dims(spec) >= 2
            && !name.contains("_norm.weight")
            && !name.contains("ffn_gate_inp.weight")
            && name != "position_embd.weight"
            && name != "token_types.weight"
            && !name.contains("ssm_conv1d.weight")
            && !name.contains("attn_rel_b.weight");
        let (to, fallback) = if !quantize {
            (spec.dtype, false)
        } else {
            let base = self.qtype.base_dtype();
            if base.is_quantized() {
                self.mixed_type(spec, base)
            } else {
                (base, false)
            }
        };
        TensorPlan {
            name: spec.name.clone(),
            from: spec.dtype,
            to,
            fallback,
        }
    }

    /// llama.cpp's `llama_tensor_get_type`, for the types tempra writes.
    fn mixed_type(&mut self, spec: &TensorSpec, base: DType) -> (DType, bool) {
        use QuantType as Q;
        let name = spec.name.as_str();
        let f = self.facts;
        let q = self.qtype;
        let nx = spec.row_len();
        let mut t = base;
        if q == Q::MXFP4MOE {
            // Stacked experts (three dims) in MXFP4, everything else (the output head too)
            // in Q8_0.
            t = if spec.shape.rank() >= 3 && spec.shape.dims()[0] > 1 {
                DType::MXFP4
            } else {
                DType::Q8_0
            };
        } else if name == "output.weight" || (!f.has_output && name == "token_embd.weight") {
            if !nx.is_multiple_of(t.block_len()) {
                t = DType::Q8_0;
            } else if t != DType::Q8_0 {
                t = DType::Q6K;
            }
        } else if name == "token_embd.weight" {
            // Only the IQ types change the token embedding.
        } else if name.contains("attn_v.weight") {
            let i = self.i_attention_wv;
            match q {
                Q::Q2K => t = if f.n_gqa >= 4 { DType::Q4K } else { DType::Q3K },
                Q::Q3KM => t = if i < 2 { DType::Q5K } else { DType::Q4K },
                Q::Q4KM | Q::Q5KM if use_more_bits(i, f.n_attention_wv) => t = DType::Q6K,
                Q::IQ4NL | Q::IQ4XS if f.n_gqa >= 4 => t = DType::Q5K,
                _ => {}
            }
            if f.is_70b && matches!(t, DType::Q3K | DType::Q4K) {
                t = DType::Q5K;
            }
            if f.n_expert == 8 {
                t = DType::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if name.contains("attn_k.weight") {
            if f.n_expert == 8 {
                t = DType::Q8_0;
            }
        } else if name.contains("attn_q.weight") {
            // Only the IQ types change attn_q.
        } else if name.contains("ffn_down") {
            let (i, n) = (self.i_ffn_down, f.n_layer);
            match q {
                Q::Q2K => t = DType::Q3K,
                Q::Q3KM => t = if i < n / 16 { DType::Q5K } else { DType::Q4K },
                Q::Q4KM | Q::Q5KM if use_more_bits(i, n) => t = DType::Q6K,
                Q::IQ4NL | Q::IQ4XS if i < n / 8 => t = DType::Q5K,
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if name.contains("attn_output.weight") {
            if f.n_expert == 8 {
                if matches!(q, Q::Q2K | Q::Q3KM | Q::Q4KM | Q::IQ4NL | Q::IQ4XS) {
                    t = DType::Q5K;
                }
            } else {
                match q {
                    Q::Q2K => t = DType::Q3K,
                    Q::Q3KM => t = DType::Q4K,
                    _ => {}
                }
            }
        } else if name.contains("attn_qkv.weight") {
            match q {
                Q::Q3KM => t = DType::Q4K,
                Q::Q4KM => t = DType::Q5K,
                Q::Q5KM => t = DType::Q6K,
                _ => {}
            }
        }

        if nx.is_multiple_of(t.block_len()) {
            return (t, false);
        }
        t = match t {
            DType::Q2K | DType::Q3K => DType::Q4_0,
            DType::Q4K => DType::Q5_0,
            DType::Q5K => DType::Q5_1,
            DType::Q6K => DType::Q8_0,
            DType::IQ4XS => DType::IQ4NL,
            _ => DType::F16,
        };
        if !nx.is_multiple_of(t.block_len()) {
            t = DType::F16;
        }
        (t, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_names::{BlockTensor, block_weight};
    use tempra_tensor::Shape;

    fn model(n_layer: usize, dim: usize, tied: bool) -> (Metadata, Vec<TensorSpec>) {
        let mut md = Metadata::new();
        md.set("general.architecture", "llama");
        md.set("llama.block_count", n_layer as u32);
        md.set("llama.attention.head_count", 32u32);
        md.set("llama.attention.head_count_kv", 4u32);
        let spec = |name: String, dims: &[usize]| {
            TensorSpec::new(name, Shape::new(dims).unwrap(), DType::F32)
        };
        let mut specs = vec![spec("token_embd.weight".into(), &[1000, dim])];
        for l in 0..n_layer {
            specs.push(spec(block_weight(l, BlockTensor::AttnNorm), &[dim]));
            for t in [
                BlockTensor::AttnQ,
                BlockTensor::AttnK,
                BlockTensor::AttnV,
                BlockTensor::AttnOutput,
            ] {
                specs.push(spec(block_weight(l, t), &[dim, dim]));
            }
            specs.push(spec(block_weight(l, BlockTensor::FfnGate), &[2 * dim, dim]));
            specs.push(spec(block_weight(l, BlockTensor::FfnDown), &[dim, 2 * dim]));
        }
        specs.push(spec("output_norm.weight".into(), &[dim]));
        if !tied {
            specs.push(spec("output.weight".into(), &[1000, dim]));
        }
        (md, specs)
    }

    fn plans(q: QuantType, md: &Metadata, specs: &[TensorSpec]) -> Vec<TensorPlan> {
        let mut p = TensorTypePlanner::new(q, md, specs);
        specs.iter().map(|s| p.plan(s)).collect()
    }

    fn to(plans: &[TensorPlan], name: &str) -> DType {
        plans.iter().find(|p| p.name == name).unwrap().to
    }

    #[test]
    fn use_more_bits_matches_llama_cpp() {
        // 32 layers: 0..4, 28..32, and 4 + 3k + 2.
        let more: Vec<usize> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
        assert_eq!(
            more,
            [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
    }

    #[test]
    fn q4_k_m_mix() {
        let (md, specs) = model(8, 256, false);
        let p = plans(QuantType::Q4KM, &md, &specs);
        assert_eq!(to(&p, "output.weight"), DType::Q6K);
        assert_eq!(to(&p, "token_embd.weight"), DType::Q4K);
        assert_eq!(to(&p, "blk.0.attn_norm.weight"), DType::F32);
        assert_eq!(to(&p, "blk.0.attn_q.weight"), DType::Q4K);
        // n = 8: layers 0, 7 and (i - 1) % 3 == 2 → 3, 6.
        for l in 0..8 {
            let want = if [0, 3, 6, 7].contains(&l) {
                DType::Q6K
            } else {
                DType::Q4K
            };
            assert_eq!(
                to(&p, &format!("blk.{l}.attn_v.weight")),
                want,
                "attn_v {l}"
            );
            assert_eq!(
                to(&p, &format!("blk.{l}.ffn_down.weight")),
                want,
                "ffn_down {l}"
            );
        }
        assert!(p.iter().all(|p| !p.fallback));
    }

    #[test]
    fn tied_embedding_gets_the_output_type() {
        let (md, specs) = model(2, 256, true);
        let p = plans(QuantType::Q4_0, &md, &specs);
        assert_eq!(to(&p, "token_embd.weight"), DType::Q6K);
        assert_eq!(to(&p, "blk.1.ffn_down.weight"), DType::Q4_0);
        let p = plans(QuantType::Q8_0, &md, &specs);
        assert_eq!(to(&p, "token_embd.weight"), DType::Q8_0);
        let p = plans(QuantType::F16, &md, &specs);
        assert_eq!(to(&p, "token_embd.weight"), DType::F16);
        assert_eq!(to(&p, "output_norm.weight"), DType::F32);
    }

    #[test]
    fn q2_k_and_q3_k_m_mixes() {
        let (md, specs) = model(16, 256, false);
        let p = plans(QuantType::Q2K, &md, &specs);
        assert_eq!(to(&p, "blk.5.attn_v.weight"), DType::Q4K, "GQA 8 ≥ 4");
        assert_eq!(to(&p, "blk.5.ffn_down.weight"), DType::Q3K);
        assert_eq!(to(&p, "blk.5.attn_output.weight"), DType::Q3K);
        assert_eq!(to(&p, "blk.5.attn_q.weight"), DType::Q2K);
        let p = plans(QuantType::Q3KM, &md, &specs);
        assert_eq!(to(&p, "blk.1.attn_v.weight"), DType::Q5K);
        assert_eq!(to(&p, "blk.2.attn_v.weight"), DType::Q4K);
        assert_eq!(to(&p, "blk.0.ffn_down.weight"), DType::Q5K);
        assert_eq!(to(&p, "blk.1.ffn_down.weight"), DType::Q4K);
        assert_eq!(to(&p, "blk.1.attn_output.weight"), DType::Q4K);
        assert_eq!(to(&p, "blk.1.ffn_gate.weight"), DType::Q3K);
    }

    /// llama.cpp's IQ4_NL/IQ4_XS mix without an importance matrix: Q6_K output,
    /// `attn_v` Q5_K at GQA ≥ 4 (the test model's 8), `ffn_down` Q5_K in the first eighth
    /// of the layers, IQ4_XS → IQ4_NL where 256 does not divide a row.
    #[test]
    fn iq4_mixes() {
        let (md, mut specs) = model(16, 256, false);
        specs.push(TensorSpec::new(
            "blk.0.ffn_up.weight",
            Shape::new(&[64, 160]).unwrap(),
            DType::F32,
        ));
        for (q, base) in [
            (QuantType::IQ4NL, DType::IQ4NL),
            (QuantType::IQ4XS, DType::IQ4XS),
        ] {
            let p = plans(q, &md, &specs);
            assert_eq!(to(&p, "output.weight"), DType::Q6K);
            assert_eq!(to(&p, "token_embd.weight"), base);
            assert_eq!(to(&p, "blk.3.attn_v.weight"), DType::Q5K);
            assert_eq!(to(&p, "blk.3.attn_q.weight"), base);
            assert_eq!(to(&p, "blk.3.attn_output.weight"), base);
            assert_eq!(
                to(&p, "blk.1.ffn_down.weight"),
                DType::Q5K,
                "16 / 8 = 2 layers"
            );
            assert_eq!(to(&p, "blk.2.ffn_down.weight"), base);
            assert_eq!(to(&p, "blk.0.ffn_up.weight"), DType::IQ4NL, "160 = 5 × 32");
        }
        let mut md = md;
        md.set("llama.attention.head_count_kv", 32u32);
        let p = plans(QuantType::IQ4XS, &md, &specs);
        assert_eq!(to(&p, "blk.3.attn_v.weight"), DType::IQ4XS, "no GQA");
    }

    #[test]
    fn odd_rows_fall_back() {
        // dim 64: no K-quant fits; Q4_K → Q5_0, Q6_K → Q8_0; rows of 172 fit no block.
        let (md, mut specs) = model(2, 64, false);
        specs.push(TensorSpec::new(
            "blk.0.ffn_up.weight",
            Shape::new(&[64, 172]).unwrap(),
            DType::F32,
        ));
        let p = plans(QuantType::Q4KM, &md, &specs);
        assert_eq!(to(&p, "blk.1.attn_q.weight"), DType::Q5_0);
        assert_eq!(to(&p, "output.weight"), DType::Q8_0);
        assert_eq!(to(&p, "blk.0.attn_v.weight"), DType::Q5_0);
        assert_eq!(
            to(&p, "blk.1.attn_v.weight"),
            DType::Q8_0,
            "Q6_K falls back to Q8_0"
        );
        assert_eq!(to(&p, "blk.0.ffn_up.weight"), DType::F16);
        assert!(
            p.iter()
                .find(|p| p.name == "blk.1.attn_q.weight")
                .unwrap()
                .fallback
        );
        let p = plans(QuantType::Q4_0, &md, &specs);
        assert_eq!(to(&p, "blk.0.ffn_up.weight"), DType::F16);
        assert_eq!(to(&p, "blk.0.attn_q.weight"), DType::Q4_0);
    }
}
