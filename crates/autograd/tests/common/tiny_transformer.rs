//! A tiny causal transformer (Llama-shaped: embedding, rms_norm, rope, grouped-query
//! attention, SwiGLU MLP, tied head) written once over `Var`, plus the same forward over
//! plain facade calls for the benchmark's comparison.

#![allow(dead_code, unreachable_pub)]

use tempra_autograd::{Autograd, ParamId, ParamStore, Result, Var};
use tempra_tensor::{AttentionParams, DType, ExecContext, RopeConfig, RopeStyle, Tensor};

/// Sizes of [`TinyTransformer`].
#[derive(Clone, Copy, Debug)]
pub struct TinyConfig {
    pub vocab: usize,
    pub dim: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub layers: usize,
}

impl TinyConfig {
    pub fn head_dim(&self) -> usize {
        self.dim / self.heads
    }
}

struct Layer {
    attn_norm: ParamId,
    wq: ParamId,
    wk: ParamId,
    wv: ParamId,
    wo: ParamId,
    ffn_norm: ParamId,
    w_gate: ParamId,
    w_up: ParamId,
    w_down: ParamId,
}

/// The model: parameter ids into a [`ParamStore`] that owns the values.
pub struct TinyTransformer {
    pub cfg: TinyConfig,
    tok_emb: ParamId,
    layers: Vec<Layer>,
    out_norm: ParamId,
    rope: RopeConfig,
}

const EPS: f64 = 1e-5;

impl TinyTransformer {
    /// Random weights (reproducible from `seed`) added to `params`.
    pub fn new(
        ctx: &ExecContext,
        cfg: TinyConfig,
        params: &mut ParamStore,
        seed: u64,
    ) -> Result<Self> {
        let mut seed = seed;
        let mut normal = |dims: &[usize], std: f64| -> Result<Tensor> {
            seed += 1;
            Ok(ctx.randn(dims, DType::F32, 0.0, std, seed)?)
        };
        let ones = |n: usize| -> Result<Tensor> { Ok(ctx.full(&[n], DType::F32, 1.0)?) };
        let (d, hd, kv) = (cfg.dim, cfg.head_dim(), cfg.kv_heads * cfg.head_dim());
        let tok_emb = params.add("tok_emb", normal(&[cfg.vocab, d], 0.3)?)?;
        let mut layers = Vec::new();
        for l in 0..cfg.layers {
            let n = |s: &str| format!("blk.{l}.{s}");
            let proj = (d as f64).powf(-0.5);
            layers.push(Layer {
                attn_norm: params.add(&n("attn_norm"), ones(d)?)?,
                wq: params.add(&n("wq"), normal(&[d, d], proj)?)?,
                wk: params.add(&n("wk"), normal(&[kv, d], proj)?)?,
                wv: params.add(&n("wv"), normal(&[kv, d], proj)?)?,
                wo: params.add(&n("wo"), normal(&[d, d], proj * 0.5)?)?,
                ffn_norm: params.add(&n("ffn_norm"), ones(d)?)?,
                w_gate: params.add(&n("w_gate"), normal(&[cfg.ffn, d], proj)?)?,
                w_up: params.add(&n("w_up"), normal(&[cfg.ffn, d], proj)?)?,
                w_down: params.add(
                    &n("w_down"),
                    normal(&[d, cfg.ffn], 0.5 * (cfg.ffn as f64).powf(-0.5))?,
                )?,
            });
        }
        let out_norm = params.add("out_norm", ones(d)?)?;
        let _ = hd;
        let rope = RopeConfig::new(cfg.head_dim(), 10_000.0, RopeStyle::Neox);
        Ok(Self {
            cfg,
            tok_emb,
            layers,
            out_norm,
            rope,
        })
    }

    /// Logits `[T, vocab]` for U32 token `ids [T]` at `positions [T]`.
    pub fn forward(
        &self,
        ag: &Autograd,
        p: &ParamStore,
        ids: &Tensor,
        positions: &Tensor,
    ) -> Result<Var> {
        let c = &self.cfg;
        let (t, hd) = (ids.dims()[0], c.head_dim());
        let mut x = ag.embedding(&p[self.tok_emb], ids)?;
        for l in &self.layers {
            let h = ag.rms_norm(&x, &p[l.attn_norm], EPS)?;
            let q = ag.linear(&h, &p[l.wq], None)?.reshape(&[t, c.heads, hd])?;
            let k = ag
                .linear(&h, &p[l.wk], None)?
                .reshape(&[t, c.kv_heads, hd])?;
            let v = ag
                .linear(&h, &p[l.wv], None)?
                .reshape(&[t, c.kv_heads, hd])?;
            let q = ag.rope(&q, positions, &self.rope, None)?;
            let k = ag.rope(&k, positions, &self.rope, None)?;
            let a = ag
                .attention(&q, &k, &v, &AttentionParams::causal(hd, 0))?
                .reshape(&[t, c.dim])?;
            x = ag.add(&x, &ag.linear(&a, &p[l.wo], None)?)?;
            let h = ag.rms_norm(&x, &p[l.ffn_norm], EPS)?;
            let gate = ag.silu(&ag.linear(&h, &p[l.w_gate], None)?)?;
            let up = ag.linear(&h, &p[l.w_up], None)?;
            x = ag.add(&x, &ag.linear(&ag.mul(&gate, &up)?, &p[l.w_down], None)?)?;
        }
        let x = ag.rms_norm(&x, &p[self.out_norm], EPS)?;
        ag.linear(&x, &p[self.tok_emb], None) // tied head
    }

    /// The same forward over plain facade calls (no `Var`): the benchmark's baseline.
    pub fn forward_plain(
        &self,
        ctx: &ExecContext,
        p: &ParamStore,
        ids: &Tensor,
        positions: &Tensor,
    ) -> tempra_tensor::Result<Tensor> {
        let c = &self.cfg;
        let (t, hd) = (ids.dims()[0], c.head_dim());
        let w = |id: ParamId| p[id].tensor();
        let mut x = ctx.embedding(w(self.tok_emb), ids)?;
        for l in &self.layers {
            let h = ctx.rms_norm(&x, w(l.attn_norm), EPS)?;
            let q = ctx.linear(&h, w(l.wq), None)?.reshape(&[t, c.heads, hd])?;
            let k = ctx
                .linear(&h, w(l.wk), None)?
                .reshape(&[t, c.kv_heads, hd])?;
            let v = ctx
                .linear(&h, w(l.wv), None)?
                .reshape(&[t, c.kv_heads, hd])?;
            let q = ctx.rope(&q, positions, &self.rope, None)?;
            let k = ctx.rope(&k, positions, &self.rope, None)?;
            let a = ctx
                .attention(&q, &k, &v, &AttentionParams::causal(hd, 0))?
                .reshape(&[t, c.dim])?;
            x = ctx.add(&x, &ctx.linear(&a, w(l.wo), None)?)?;
            let h = ctx.rms_norm(&x, w(l.ffn_norm), EPS)?;
            let gate = ctx.silu(&ctx.linear(&h, w(l.w_gate), None)?)?;
            let up = ctx.linear(&h, w(l.w_up), None)?;
            x = ctx.add(&x, &ctx.linear(&ctx.mul(&gate, &up)?, w(l.w_down), None)?)?;
        }
        let x = ctx.rms_norm(&x, w(self.out_norm), EPS)?;
        ctx.linear(&x, w(self.tok_emb), None)
    }

    /// Mean next-token cross-entropy of `tokens [T+1]`: inputs `tokens[..T]`, targets
    /// `tokens[1..]`.
    pub fn loss(&self, ag: &Autograd, p: &ParamStore, tokens: &[u32]) -> Result<Var> {
        let ctx = ag.ctx();
        let t = tokens.len() - 1;
        let ids = ctx.from_slice(&tokens[..t], &[t])?;
        let targets = ctx.from_slice(&tokens[1..], &[t])?;
        let positions = ctx.arange(0.0, t as f64, 1.0, DType::U32)?;
        let logits = self.forward(ag, p, &ids, &positions)?;
        ag.cross_entropy(&logits, &targets, None)
    }
}

/// Means of consecutive windows of `w` values: the smoothed curve.
pub fn window_means(values: &[f64], w: usize) -> Vec<f64> {
    values
        .chunks_exact(w)
        .map(|c| c.iter().sum::<f64>() / w as f64)
        .collect()
}
