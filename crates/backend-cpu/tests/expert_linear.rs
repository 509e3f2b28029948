//! `expert_linear` on the CPU: against the f64 reference in the one metric (quantized
//! products within ggml's `MUL_MAT` budget, float ones to f32 rounding), and the
//! row-invariance rule bit for bit: each `(token, slot)` row is the bits of `linear` with
//! its expert's matrix alone, whether its token runs alone (decode), in chunks of a prompt
//! or in one call, at 1 and 3 threads, on every ISA, for every weight format as stored
//! and as `prepare_weight` lays out a stack of experts.

mod products;

use products::{bits, cpu_contexts, float_tensor, nmse, normal, quant_formats};
use tempra_tensor::{DType, ExecContext, Tensor};

/// The float weight formats.
const FLOAT_FORMATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Stacked expert weights `[e, n, k]` of `dtype` on `ctx` (random blocks for the formats
/// without a quantizer; prepared when asked and the backend has a layout for them).
fn experts(ctx: &ExecContext, dtype: DType, dims: [usize; 3], prepared: bool) -> Tensor {
    let values: Vec<f32> = normal(dims.iter().product(), 5)
        .iter()
        .map(|v| v * 0.2 + 0.01)
        .collect();
    let w = if dtype.is_quantized() {
        use tempra_tensor::quant;
        let bytes = if quant::has_quantizer(dtype) {
            let mut bytes = vec![0u8; dtype.bytes_for(values.len()).unwrap()];
            quant::quantize_row(dtype, &values, &mut bytes).unwrap();
            bytes
        } else {
            quant::random_blocks(dtype, values.len() / dtype.block_len(), 0.2, 5).unwrap()
        };
        ctx.from_bytes(&bytes, &dims, dtype).unwrap()
    } else {
        float_tensor(&values, &dims, dtype)
    };
    if prepared {
        ctx.prepare_weight(&w).unwrap().unwrap_or(w)
    } else {
        w
    }
}

/// Expert ids `[tokens, slots]` from `seed`: distinct within a token (as top_k gives),
/// spread so some experts get many rows and the last two none.
fn routing(tokens: usize, slots: usize, experts: usize, seed: u64) -> Vec<u32> {
    let mut ids = Vec::with_capacity(tokens * slots);
    let mut state = seed;
    for _ in 0..tokens {
        let mut chosen: Vec<u32> = Vec::new();
        while chosen.len() < slots {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = ((state >> 33) % (experts as u64 - 2)) as u32;
            if !chosen.contains(&e) {
                chosen.push(e);
            }
        }
        ids.extend(chosen);
    }
    ids
}

#[test]
fn expert_rows_match_the_reference() {
    let reference = ExecContext::reference();
    let (tokens, slots, e, n) = (5, 3, 6, 24);
    let ids = Tensor::owned_from_slice(&routing(tokens, slots, e, 3), &[tokens, slots]).unwrap();
    for dtype in FLOAT_FORMATS.into_iter().chain(quant_formats()) {
        let k = if dtype.is_quantized() { 512 } else { 67 };
        let x =
            Tensor::owned_from_slice(&normal(tokens * slots * k, 7), &[tokens, slots, k]).unwrap();
        let bias = Tensor::owned_from_slice(&normal(e * n, 8), &[e, n]).unwrap();
        let budget = if dtype.is_quantized() { 5e-4 } else { 1e-9 };
        for (name, ctx) in cpu_contexts() {
            for prepared in [false, true] {
                let w = experts(&ctx, dtype, [e, n, k], prepared);
                let want = reference
                    .expert_linear(
                        &x,
                        &reference.cast(&w, DType::F32).unwrap(),
                        &ids,
                        Some(&bias),
                    )
                    .unwrap();
                let got = ctx.expert_linear(&x, &w, &ids, Some(&bias)).unwrap();
                let err = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
                assert!(
                    err <= budget,
                    "{dtype} prepared={prepared} {name}: nmse {err:e}"
                );
                // One row per token, shared by its slots (gate and up), and a strided one.
                let shared = x.narrow(1, 1, 1).unwrap();
                let want = reference
                    .expert_linear(
                        &shared,
                        &reference.cast(&w, DType::F32).unwrap(),
                        &ids,
                        None,
                    )
                    .unwrap();
                let got = ctx.expert_linear(&shared, &w, &ids, None).unwrap();
                let err = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
                assert!(err <= budget, "{dtype} shared {name}: nmse {err:e}");
            }
        }
    }
}

#[test]
fn expert_rows_are_the_bits_of_linear_alone_in_chunks_and_in_one_call() {
    // Experts of 128 × 256, 8 of them, 3 chosen per token, 2 never: a whole call is
    // split over 3 threads in every format (past 64 KiB of weights per task).
    let (tokens, slots, e, n, k) = (7, 3, 8, 128, 256);
    let ids_v = routing(tokens, slots, e, 11);
    let ids = Tensor::owned_from_slice(&ids_v, &[tokens, slots]).unwrap();
    let x = Tensor::owned_from_slice(&normal(tokens * slots * k, 9), &[tokens, slots, k]).unwrap();
    let mut failures = Vec::new();
    for dtype in FLOAT_FORMATS.into_iter().chain(quant_formats()) {
        for prepared in [false, true] {
            let mut across_threads: Option<(String, Vec<u32>)> = None;
            for (name, ctx) in cpu_contexts() {
                let label = format!("{dtype} prepared={prepared} {name}");
                let w = experts(&ctx, dtype, [e, n, k], prepared);
                let whole = bits(&ctx.expert_linear(&x, &w, &ids, None).unwrap());
                // Each row through `linear` with its expert's matrix (a zero-copy view).
                let mut alone = Vec::with_capacity(whole.len());
                for (pair, &id) in ids_v.iter().enumerate() {
                    let row = x
                        .select(0, pair / slots)
                        .and_then(|t| t.narrow(0, pair % slots, 1))
                        .unwrap();
                    let expert = w.select(0, id as usize).unwrap();
                    alone.extend(bits(&ctx.linear(&row, &expert, None).unwrap()));
                }
                // Decode: one token per call; a prompt in chunks.
                let per_token: Vec<u32> = (0..tokens)
                    .flat_map(|t| {
                        let xt = x.narrow(0, t, 1).unwrap();
                        let it = ids.narrow(0, t, 1).unwrap();
                        bits(&ctx.expert_linear(&xt, &w, &it, None).unwrap())
                    })
                    .collect();
                let chunked: Vec<u32> = [0, 1, 4, tokens]
                    .windows(2)
                    .flat_map(|b| {
                        let xt = x.narrow(0, b[0], b[1] - b[0]).unwrap();
                        let it = ids.narrow(0, b[0], b[1] - b[0]).unwrap();
                        bits(&ctx.expert_linear(&xt, &w, &it, None).unwrap())
                    })
                    .collect();
                for (what, got) in [
                    ("linear alone", &alone),
                    ("token by token", &per_token),
                    ("chunks", &chunked),
                ] {
                    if let Some(i) = got.iter().zip(&whole).position(|(a, b)| a != b) {
                        failures.push(format!("{label}: {what} vs one call: row {}", i / n));
                    }
                }
                let isa = name.rsplit_once('-').map_or(name.as_str(), |(isa, _)| isa);
                match &across_threads {
                    Some((first, want)) if first.starts_with(isa) => {
                        if &whole != want {
                            failures.push(format!("{label} vs {first}"));
                        }
                    }
                    _ => across_threads = Some((name.clone(), whole)),
                }
                assert!(ctx.handoffs().is_empty(), "{label}: {:?}", ctx.handoffs());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rows that differ:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_prepared_stack_is_interleaved_per_expert() {
    for (name, ctx) in cpu_contexts() {
        let w = experts(&ctx, DType::Q4K, [3, 16, 256], false);
        let Some(p) = ctx.prepare_weight(&w).unwrap() else {
            continue; // the portable path keeps the file's layout
        };
        assert_eq!(
            (p.dims(), p.dtype()),
            (&[3, 16, 256][..], DType::Q4K),
            "{name}"
        );
        assert_eq!(p.to_vec_f32().unwrap(), w.to_vec_f32().unwrap(), "{name}");
        // An expert count of rows that is no multiple of eight stays as stored.
        let odd = experts(&ctx, DType::Q4K, [2, 12, 256], false);
        assert!(ctx.prepare_weight(&odd).unwrap().is_none(), "{name}");
    }
}
