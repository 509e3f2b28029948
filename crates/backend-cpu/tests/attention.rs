//! Fused causal attention against the reference: GQA groups, positions (q_start), sliding
//! windows, soft-cap, f16/f32 caches, strided K/V views of a cache, strided queries.

mod common;

use common::{check, randn};
use tempra_tensor::{AttentionParams, DType, ExecContext, Result, Tensor};

/// Online softmax in f32 (scores, weights, accumulators) against the f64 reference.
const TOL: f64 = 3e-11;

/// One attention case: `q [tq, hq, d]` over a cache of `tk` keys.
#[derive(Clone, Copy, Debug)]
struct Case {
    tq: usize,
    tk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    dv: usize,
    q_start: usize,
    window: Option<usize>,
    softcap: Option<f32>,
}

impl Case {
    fn params(&self) -> AttentionParams {
        AttentionParams {
            window: self.window,
            softcap: self.softcap,
            ..AttentionParams::causal(self.d, self.q_start)
        }
    }
}

/// K and V of `case` in `dtype`: contiguous, or a `narrow` of a longer cache, or a
/// `[H, T, D]` cache permuted to `[T, H, D]`.
fn kv(ctx: &ExecContext, c: &Case, dtype: DType, layout: usize) -> Result<(Tensor, Tensor)> {
    let make = |dim: usize, seed: u64| -> Result<Tensor> {
        match layout {
            0 => Ok(randn(ctx, &[c.tk, c.hkv, dim], dtype, seed)),
            1 => randn(ctx, &[c.tk + 9, c.hkv, dim], dtype, seed).narrow(0, 0, c.tk),
            _ => randn(ctx, &[c.hkv, c.tk + 5, dim], dtype, seed)
                .narrow(1, 2, c.tk)?
                .permute(&[1, 0, 2]),
        }
    };
    Ok((make(c.d, 11)?, make(c.dv, 12)?))
}

fn run(
    ctx: &ExecContext,
    c: &Case,
    k_dtype: DType,
    v_dtype: DType,
    layout: usize,
) -> Result<Tensor> {
    let q = ctx.mul_scalar(&randn(ctx, &[c.tq, c.hq, c.d], DType::F32, 10), 2.0)?;
    let (k, _) = kv(ctx, c, k_dtype, layout)?;
    let (_, v) = kv(ctx, c, v_dtype, layout)?;
    ctx.attention(&q, &k, &v, &c.params())
}

const BASE: Case = Case {
    tq: 5,
    tk: 37,
    hq: 8,
    hkv: 2,
    d: 64,
    dv: 64,
    q_start: 32,
    window: None,
    softcap: None,
};

#[test]
fn gqa_groups_and_head_dims() {
    // Every group shape with one head dim, and every head dim with one group shape (the
    // reference's cost grows with each; this keeps the test fast).
    let groups = [(1, 1), (4, 4), (6, 2), (8, 2), (8, 1), (12, 4), (16, 1)];
    let dims = [(1, 1), (17, 17), (64, 64), (65, 40), (128, 32)];
    let cases = groups
        .iter()
        .map(|&g| (g, (32, 32)))
        .chain(dims.iter().map(|&d| ((8, 2), d)));
    for ((hq, hkv), (d, dv)) in cases {
        let c = Case {
            hq,
            hkv,
            d,
            dv,
            tq: 2,
            ..BASE
        };
        check(&format!("{c:?}"), TOL, |ctx| {
            run(ctx, &c, DType::F16, DType::F16, 0)
        });
    }
}

#[test]
fn decode_tiles_of_few_rows() {
    // One position against the cache: a tile holds one KV head's query heads, so models
    // without GQA (one row) and small groups (two to seven rows) take the eight-keys-at-a-
    // time scores and the several-vectors-per-pass value sums. Key counts around the
    // eight-key batches and the 64-key blocks; head dims around whole vectors and the
    // multi-vector passes (72 = one pass of eight vectors and one more, 132 a partial one).
    let groups = [(1, 1), (4, 4), (4, 2), (6, 2), (12, 4), (14, 2), (8, 1)];
    let keys = [1, 7, 8, 9, 64, 65, 130];
    let dims = [(17, 17), (65, 40), (128, 72), (96, 132), (8, 1)];
    let group_cases = groups
        .iter()
        .flat_map(|&g| keys.iter().map(move |&tk| (g, (64, 64), tk)));
    let dim_cases = dims.iter().flat_map(|&d| {
        [(1, 1), (6, 2), (12, 4)]
            .into_iter()
            .flat_map(move |g| [9, 130].map(|tk| (g, d, tk)))
    });
    for ((hq, hkv), (d, dv), tk) in group_cases.chain(dim_cases) {
        let c = Case {
            tq: 1,
            tk,
            hq,
            hkv,
            d,
            dv,
            q_start: tk - 1,
            ..BASE
        };
        check(&format!("{c:?}"), TOL, |ctx| {
            run(ctx, &c, DType::F16, DType::F16, 1)
        });
    }
    // Both cache dtypes, a window and a soft-cap with one-row tiles.
    let c = Case {
        tq: 1,
        tk: 75,
        hq: 3,
        hkv: 3,
        q_start: 74,
        ..BASE
    };
    for (kd, vd) in [
        (DType::F32, DType::F32),
        (DType::F16, DType::F32),
        (DType::F32, DType::F16),
    ] {
        check(&format!("{c:?} k {kd} v {vd}"), TOL, |ctx| {
            run(ctx, &c, kd, vd, 0)
        });
    }
    for (window, softcap) in [(Some(20), None), (None, Some(3.0)), (Some(9), Some(2.0))] {
        let c = Case {
            window,
            softcap,
            ..c
        };
        check(&format!("{c:?}"), TOL, |ctx| {
            run(ctx, &c, DType::F16, DType::F16, 2)
        });
    }
}

#[test]
fn positions_windows_and_softcap() {
    let cases = [
        Case {
            tq: 9,
            tk: 9,
            q_start: 0,
            ..BASE
        }, // full causal prefill
        Case {
            tq: 1,
            tk: 70,
            q_start: 69,
            ..BASE
        }, // decode
        Case {
            tq: 4,
            tk: 70,
            q_start: 20,
            ..BASE
        }, // keys beyond the queries
        Case {
            tq: 6,
            tk: 70,
            q_start: 64,
            window: Some(16),
            ..BASE
        }, // sliding window
        Case {
            tq: 3,
            tk: 10,
            q_start: 30,
            window: Some(8),
            ..BASE
        }, // window past every key: zeros
        Case {
            tq: 5,
            tk: 70,
            q_start: 65,
            window: Some(1),
            ..BASE
        }, // only the diagonal
        Case {
            tq: 5,
            tk: 70,
            q_start: 65,
            softcap: Some(5.0),
            ..BASE
        }, // Gemma 2 soft-cap
        Case {
            tq: 3,
            tk: 130,
            q_start: 127,
            softcap: Some(30.0),
            window: Some(100),
            ..BASE
        },
        Case {
            tq: 33,
            tk: 33,
            q_start: 0,
            hq: 2,
            hkv: 2,
            ..BASE
        }, // no GQA: tiles of eight positions, a short last one
        Case {
            tq: 20,
            tk: 90,
            q_start: 70,
            hq: 3,
            hkv: 3,
            window: Some(12),
            softcap: Some(20.0),
            ..BASE
        }, // eight-position tiles whose rows' windows differ, under a soft-cap
    ];
    for c in cases {
        check(&format!("{c:?}"), TOL, |ctx| {
            run(ctx, &c, DType::F16, DType::F16, 0)
        });
    }
}

#[test]
fn blocked_prefill_tiles() {
    // Prefill tiles wider than the narrow kernel's eight rows run blocked, through the
    // GEMM micro-kernel. Small cases (this test also runs under valgrind): a group of four
    // at twelve positions with odd, unequal head dims (partial panels everywhere), a key
    // range past one block, a window; an f32 narrowed cache and a permuted mixed one.
    let small = Case {
        tq: 12,
        tk: 80,
        q_start: 68,
        hq: 8,
        hkv: 2,
        d: 17,
        dv: 33,
        window: None,
        softcap: None,
    };
    let cases = [
        (small, DType::F16, DType::F16, 0),
        (
            Case {
                window: Some(70),
                softcap: Some(15.0),
                ..small
            },
            DType::F16,
            DType::F16,
            0,
        ),
        (small, DType::F32, DType::F32, 1),
        (
            Case {
                d: 16,
                dv: 16,
                ..small
            },
            DType::F16,
            DType::F32,
            2,
        ),
    ];
    for (c, kd, vd, layout) in cases {
        check(
            &format!("{c:?} k {kd} v {vd} layout {layout}"),
            TOL,
            |ctx| run(ctx, &c, kd, vd, layout),
        );
    }
}

#[test]
fn blocked_prefill_shapes() {
    // Blocked tiles at prefill sizes: GQA groups of 8 (six positions per tile), 4, 3 and
    // 1 (48 positions), odd and unequal head dims, several key blocks, a chunk that starts
    // past position 0, sliding windows (blocks that start before a row's first key) and a
    // soft-cap, f16 and f32 caches in every layout.
    let wide = Case {
        tq: 70,
        tk: 150,
        q_start: 80,
        hq: 8,
        hkv: 1,
        d: 64,
        dv: 64,
        window: None,
        softcap: None,
    };
    let cases = [
        wide,
        Case {
            tq: 100,
            tk: 100,
            q_start: 0,
            hq: 2,
            hkv: 2,
            ..wide
        }, // no GQA: 48 positions per tile, a short last tile
        Case {
            hq: 8,
            hkv: 2,
            d: 17,
            dv: 33,
            ..wide
        },
        Case {
            hq: 4,
            hkv: 4,
            d: 65,
            dv: 40,
            tq: 20,
            ..wide
        },
        Case {
            d: 1,
            dv: 1,
            tq: 9,
            ..wide
        },
        Case {
            window: Some(37),
            softcap: Some(15.0),
            ..wide
        },
        Case {
            tq: 30,
            tk: 200,
            q_start: 170,
            hq: 3,
            hkv: 1,
            window: Some(90),
            d: 128,
            dv: 128,
            ..wide
        }, // groups of 3: sixteen positions per tile
    ];
    for c in cases {
        check(&format!("{c:?}"), TOL, |ctx| {
            run(ctx, &c, DType::F16, DType::F16, 0)
        });
    }
    for (kd, vd, layout) in [
        (DType::F32, DType::F32, 1),
        (DType::F16, DType::F32, 2),
        (DType::F32, DType::F16, 2),
    ] {
        let c = Case { tq: 40, ..wide };
        check(
            &format!("blocked, k {kd} v {vd} layout {layout}"),
            TOL,
            |ctx| run(ctx, &c, kd, vd, layout),
        );
    }
}

#[test]
fn cache_dtypes_and_layouts() {
    let c = Case {
        tq: 2,
        tk: 40,
        q_start: 38,
        hq: 4,
        d: 32,
        dv: 32,
        ..BASE
    };
    // Every layout with an f16 cache, every dtype mix with a narrowed cache.
    let combos = [
        (DType::F16, DType::F16, 0),
        (DType::F16, DType::F16, 2),
        (DType::F32, DType::F32, 1),
    ];
    let mixed = [
        (DType::F16, DType::F32, 1),
        (DType::F32, DType::F16, 1),
        (DType::F16, DType::F16, 1),
    ];
    for (kd, vd, layout) in combos.into_iter().chain(mixed) {
        check(&format!("k {kd} v {vd} layout {layout}"), TOL, |ctx| {
            run(ctx, &c, kd, vd, layout)
        });
    }
}

#[test]
fn strided_queries_and_batches() {
    // Queries as a narrow of a fused QKV projection: [T, 3·H, D] → heads 0..H.
    check("fused qkv view", TOL, |ctx| {
        let c = BASE;
        let qkv = randn(ctx, &[c.tq, 3 * c.hq, c.d], DType::F32, 3);
        let q = qkv.narrow(1, 0, c.hq)?;
        let (k, v) = kv(ctx, &c, DType::F16, 1)?;
        ctx.attention(&q, &k, &v, &c.params())
    });
    check("transposed query head dim", TOL, |ctx| {
        let c = Case {
            d: 33,
            dv: 33,
            ..BASE
        };
        let q = randn(ctx, &[c.tq, c.d, c.hq], DType::F32, 4).transpose(1, 2)?;
        let (k, v) = kv(ctx, &c, DType::F32, 0)?;
        ctx.attention(&q, &k, &v, &c.params())
    });
    check("batched lead dims", TOL, |ctx| {
        let c = Case {
            tq: 2,
            tk: 20,
            q_start: 18,
            ..BASE
        };
        let q = randn(ctx, &[2, c.tq, c.hq, c.d], DType::F32, 5);
        let k = randn(ctx, &[2, c.tk + 3, c.hkv, c.d], DType::F16, 6).narrow(1, 0, c.tk)?;
        let v = randn(ctx, &[c.tk, c.hkv, c.d], DType::F16, 7)
            .unsqueeze(0)?
            .broadcast_to(&[2, c.tk, c.hkv, c.d])?;
        ctx.attention(&q, &k, &v, &c.params())
    });
}

#[test]
fn threads_split_large_work() {
    // Enough work per call that both threads take part (the 1- and 2-thread results must
    // agree bitwise: `check` compares them).
    let c = Case {
        tq: 4,
        tk: 260,
        hq: 8,
        hkv: 2,
        d: 64,
        dv: 64,
        q_start: 256,
        window: None,
        softcap: None,
    };
    check("prefill chunk, 2 threads", TOL, |ctx| {
        run(ctx, &c, DType::F16, DType::F16, 1)
    });
    let c = Case {
        tq: 1,
        tk: 600,
        hq: 8,
        hkv: 4,
        q_start: 599,
        ..c
    };
    check("decode, 2 threads", TOL, |ctx| {
        run(ctx, &c, DType::F16, DType::F16, 1)
    });
}

#[test]
fn f64_is_delegated() {
    check("f64", 1e-24, |ctx| {
        let q = randn(ctx, &[3, 2, 8], DType::F64, 1);
        let k = randn(ctx, &[5, 1, 8], DType::F64, 2);
        let v = randn(ctx, &[5, 1, 8], DType::F64, 3);
        ctx.attention(&q, &k, &v, &AttentionParams::causal(8, 2))
    });
}
