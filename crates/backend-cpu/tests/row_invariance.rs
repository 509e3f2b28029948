//! The row-invariance rule of the CPU kernels: a row's result never depends on how many
//! other rows share its call, which they are, where the call was split into chunks, or
//! how many threads ran it. Checked bit for bit on `linear` over every weight format
//! (F32, F16, BF16 and every block-quantized one, as stored and in the layout
//! `prepare_weight` makes at load) and on causal attention
//! (GQA, sliding window, soft-cap, an f16 cache), on every ISA this CPU runs, at 1 and
//! 3 threads, with matrices large enough that the worker pool splits them.

mod products;

use products::{bits, cpu_contexts, float_tensor, normal, quant_formats, quantized_tensor};
use tempra_tensor::{AttentionParams, DType, ExecContext, Tensor};

/// Input rows per call: past the quantized tile of four and the 6- and 16-row GEMM tiles.
const ROWS: usize = 37;

/// Chunk boundaries a prompt of [`ROWS`] rows is split at (a prefill in chunks).
const CHUNKS: [usize; 5] = [0, 5, 6, 23, ROWS];

/// Where two runs of the same rows first differ, for the message.
fn first_difference(got: &[u32], want: &[u32], width: usize) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!(
            "row {} col {}: {} vs {}",
            i / width,
            i % width,
            f32::from_bits(got[i]),
            f32::from_bits(want[i])
        ),
        None => format!("lengths {} vs {}", got.len(), want.len()),
    }
}

/// The weight `[n, k]` of `dtype` on `ctx`, prepared for `linear` when `prepared` (and the
/// backend has a layout for it).
fn weight(ctx: &ExecContext, dtype: DType, n: usize, k: usize, prepared: bool) -> Tensor {
    let values: Vec<f32> = normal(n * k, 5).iter().map(|v| v * 0.2 + 0.01).collect();
    let w = if dtype.is_quantized() {
        quantized_tensor(ctx, &values, n, k, dtype)
    } else {
        float_tensor(&values, &[n, k], dtype)
    };
    if prepared {
        ctx.prepare_weight(&w).unwrap().unwrap_or(w)
    } else {
        w
    }
}

/// The float weight formats.
const FLOAT_FORMATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn linear_rows_are_the_same_bits_alone_in_chunks_and_in_one_call() {
    // 512 × 512: above 64 KiB of weights per task in every format, so 3 threads split it.
    let mut failures = Vec::new();
    let formats = FLOAT_FORMATS.into_iter().chain(quant_formats());
    for dtype in formats {
        check_linear(dtype, 512, 512, &mut failures);
    }
    // Float weights at a depth with a tail past the last whole vector and a width that is
    // no multiple of any tile (still above 64 KiB per task for 3 threads).
    for dtype in FLOAT_FORMATS {
        check_linear(dtype, 389, 523, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "rows that differ:\n{}",
        failures.join("\n")
    );
}

/// Runs [`ROWS`] rows through `linear` over a `[n, k]` weight of `dtype` alone, in
/// chunks and in one call, on every CPU context, pushing each difference to `failures`.
fn check_linear(dtype: DType, n: usize, k: usize, failures: &mut Vec<String>) {
    let x_values = normal(ROWS * k, 9);
    let x = Tensor::owned_from_slice(&x_values, &[ROWS, k]).unwrap();
    {
        for prepared in [false, true] {
            let mut across_threads: Option<(String, Vec<u32>)> = None;
            for (name, ctx) in cpu_contexts() {
                let label = format!("{dtype} [{n}, {k}] prepared={prepared} {name}");
                let w = weight(&ctx, dtype, n, k, prepared);
                let whole = bits(&ctx.linear(&x, &w, None).unwrap());
                let mut alone = Vec::with_capacity(ROWS * n);
                for r in 0..ROWS {
                    let row = x.narrow(0, r, 1).unwrap();
                    alone.extend(bits(&ctx.linear(&row, &w, None).unwrap()));
                }
                let mut chunked = Vec::with_capacity(ROWS * n);
                for pair in CHUNKS.windows(2) {
                    let chunk = x.narrow(0, pair[0], pair[1] - pair[0]).unwrap();
                    chunked.extend(bits(&ctx.linear(&chunk, &w, None).unwrap()));
                }
                if alone != whole {
                    let at = first_difference(&alone, &whole, n);
                    failures.push(format!("{label}: rows alone vs one call: {at}"));
                }
                if chunked != whole {
                    let at = first_difference(&chunked, &whole, n);
                    failures.push(format!("{label}: chunks vs one call: {at}"));
                }
                // The same ISA at another thread count gives the same bits.
                let isa = name.rsplit_once('-').map_or(name.as_str(), |(isa, _)| isa);
                match &across_threads {
                    Some((first, want)) if first.starts_with(isa) => {
                        if &whole != want {
                            let at = first_difference(&whole, want, n);
                            failures.push(format!("{label} vs {first}: {at}"));
                        }
                    }
                    _ => across_threads = Some((name.clone(), whole)),
                }
            }
        }
    }
}

/// One attention layout: `hq` query heads over `hkv` KV heads of dim `d`.
struct Heads {
    hq: usize,
    hkv: usize,
    d: usize,
    window: Option<usize>,
    softcap: Option<f32>,
}

#[test]
fn attention_queries_are_the_same_bits_alone_in_chunks_and_in_one_call() {
    // 150 positions: past two key blocks of 64, so blocks, masks and windows all matter.
    let t = 150;
    let cases = [
        Heads {
            hq: 8,
            hkv: 2,
            d: 64,
            window: None,
            softcap: None,
        },
        Heads {
            hq: 4,
            hkv: 4,
            d: 48,
            window: Some(70),
            softcap: Some(30.0),
        },
        Heads {
            hq: 16,
            hkv: 2,
            d: 128,
            window: None,
            softcap: None,
        },
    ];
    let mut failures = Vec::new();
    for heads in &cases {
        let q_values = normal(t * heads.hq * heads.d, 21);
        let q = Tensor::owned_from_slice(&q_values, &[t, heads.hq, heads.d]).unwrap();
        let kv = |seed| {
            let v = normal(t * heads.hkv * heads.d, seed);
            float_tensor(&v, &[t, heads.hkv, heads.d], DType::F16)
        };
        let (k, v) = (kv(22), kv(23));
        let params = |q_start| AttentionParams {
            window: heads.window,
            softcap: heads.softcap,
            ..AttentionParams::causal(heads.d, q_start)
        };
        // Queries `start..end` against the keys up to `end`: what the engine runs for a
        // chunk of a prompt, the cache holding the keys before it.
        let run = |ctx: &ExecContext, start: usize, end: usize| {
            let qs = q.narrow(0, start, end - start).unwrap();
            let (ks, vs) = (k.narrow(0, 0, end).unwrap(), v.narrow(0, 0, end).unwrap());
            bits(&ctx.attention(&qs, &ks, &vs, &params(start)).unwrap())
        };
        let width = heads.hq * heads.d;
        for (name, ctx) in cpu_contexts() {
            let label = format!("hq={} hkv={} d={} {name}", heads.hq, heads.hkv, heads.d);
            let whole = run(&ctx, 0, t);
            let alone: Vec<u32> = (0..t).flat_map(|p| run(&ctx, p, p + 1)).collect();
            let bounds = [0, 1, 9, 64, 65, 131, t];
            let chunked: Vec<u32> = bounds
                .windows(2)
                .flat_map(|b| run(&ctx, b[0], b[1]))
                .collect();
            if alone != whole {
                let at = first_difference(&alone, &whole, width);
                failures.push(format!("{label}: queries alone vs one call: {at}"));
            }
            if chunked != whole {
                let at = first_difference(&chunked, &whole, width);
                failures.push(format!("{label}: chunks vs one call: {at}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "queries that differ:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_fast_prefill_is_what_the_rule_rules_out() {
    // The check above can see a difference: with `fast_prefill`, 37 rows of Q8_0 run the
    // dequantized GEMM and differ from each row alone (the integer products), and 37 rows
    // of F16 run the blocked GEMM, whose sums differ from the dot products.
    use std::sync::Arc;
    use tempra_backend_cpu::{CpuBackend, CpuConfig};
    use tempra_tensor::tempra_pool::HostPool;

    let config = CpuConfig {
        threads: Some(1),
        fast_prefill: true,
        ..CpuConfig::default()
    };
    let ctx = ExecContext::new(Arc::new(
        CpuBackend::with_config(HostPool::host(), config).unwrap(),
    ));
    let (n, k) = (64, 256);
    let x = Tensor::owned_from_slice(&normal(ROWS * k, 3), &[ROWS, k]).unwrap();
    for dtype in [DType::Q8_0, DType::F16] {
        let w = weight(&ctx, dtype, n, k, false);
        let whole = bits(&ctx.linear(&x, &w, None).unwrap());
        let alone: Vec<u32> = (0..ROWS)
            .flat_map(|r| bits(&ctx.linear(&x.narrow(0, r, 1).unwrap(), &w, None).unwrap()))
            .collect();
        assert_ne!(
            whole, alone,
            "{dtype}: the fast prefill ran the row-invariant path"
        );
    }
}
