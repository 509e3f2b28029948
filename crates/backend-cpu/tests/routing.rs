//! The routing ops of a mixture of experts on the CPU against the reference: `top_k` and
//! `gather` exact (values and indices, with ties, NaNs, infinities and signed zeros, both
//! the stack selection and the sorting path of large `k`, strided rows, row counts that
//! split over threads), `weighted_sum` to f32 rounding and, bit for bit, the same sum a
//! row gets alone as in a batch.

mod common;

use common::{assert_bitwise, check, cpus, randn};
use tempra_tensor::{DType, ExecContext, Result, Tensor};

/// `[rows, n]` values with many ties (a handful of levels), a NaN, ±∞ and ±0 mixed in.
fn scores(ctx: &ExecContext, rows: usize, n: usize, seed: u64) -> Result<Tensor> {
    let base = randn(ctx, &[rows, n], DType::F32, seed).to_vec_f32()?;
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
    let v: Vec<f32> = base
        .iter()
        .enumerate()
        .map(|(i, &x)| match i % 11 {
            3 => specials[(i / 11) % specials.len()],
            5..=7 => (x * 2.0).round(),
            _ => x,
        })
        .collect();
    ctx.from_slice(&v, &[rows, n])
}

#[test]
fn top_k_is_exact_on_every_path() {
    // Every size with the stack selection (k ≤ 32) and the sort (k > 32); 600 rows of
    // 64 split over threads.
    let mut shapes = Vec::new();
    for n in [1usize, 3, 17, 33, 255, 257] {
        for k in [1, 2, 8, 33, n].map(|k| k.min(n)) {
            shapes.push((3, n, k));
        }
    }
    shapes.extend([(600, 64, 8), (600, 64, 40)]);
    for (rows, n, k) in shapes {
        for output in 0..2 {
            let what = format!("top_k n={n} k={k} rows={rows} output {output}");
            check(&what, 0.0, |ctx| {
                let (v, i) = ctx.top_k(&scores(ctx, rows, n, 1)?, k)?;
                Ok(if output == 0 { v } else { i })
            });
        }
    }
    for output in 0..2 {
        check(
            &format!("top_k transposed rows output {output}"),
            0.0,
            |ctx| {
                let x = scores(ctx, 64, 40, 2)?.t()?; // [40, 64], rows strided
                let (v, i) = ctx.top_k(&x, 5)?;
                Ok(if output == 0 { v } else { i })
            },
        );
    }
}

#[test]
fn gather_is_exact() {
    for (rows, n, k) in [
        (1usize, 1usize, 1usize),
        (5, 64, 8),
        (700, 128, 8),
        (3, 33, 40),
    ] {
        let picks: Vec<u32> = (0..rows * k).map(|i| ((i * 37 + 11) % n) as u32).collect();
        check(&format!("gather [{rows}, {n}] k={k}"), 0.0, |ctx| {
            let idx = ctx.from_slice(&picks, &[rows, k])?;
            ctx.gather(&randn(ctx, &[rows, n], DType::F32, 3), &idx)
        });
    }
    check("gather strided x and indices", 0.0, |ctx| {
        let x = randn(ctx, &[9, 6], DType::F32, 4).t()?; // [6, 9]
        let idx: Vec<u32> = (0..24).map(|i| (i * 5 % 9) as u32).collect();
        let idx = ctx.from_slice(&idx, &[4, 6])?.t()?; // [6, 4]
        ctx.gather(&x, &idx)
    });
}

#[test]
fn weighted_sum_matches_and_is_the_same_bits_in_any_batch() {
    for (tokens, slots, d) in [
        (1usize, 1usize, 1usize),
        (1, 8, 1024),
        (37, 8, 257),
        (300, 2, 130),
    ] {
        check(
            &format!("weighted_sum [{tokens}, {slots}, {d}]"),
            1e-13,
            |ctx| {
                let x = randn(ctx, &[tokens, slots, d], DType::F32, 5);
                let w = ctx.rand(&[tokens, slots], DType::F32, 0.0, 1.0, 6)?;
                ctx.weighted_sum(&x, &w)
            },
        );
    }
    check("weighted_sum strided", 1e-13, |ctx| {
        let x = randn(ctx, &[5, 33, 4], DType::F32, 7).transpose(1, 2)?; // [5, 4, 33]
        let w = randn(ctx, &[4, 5], DType::F32, 8).t()?;
        ctx.weighted_sum(&x, &w)
    });
    for cpu in cpus() {
        let c = &cpu.ctx;
        let x = randn(c, &[300, 8, 96], DType::F32, 9);
        let w = c.rand(&[300, 8], DType::F32, 0.0, 1.0, 10).unwrap();
        let whole = c.weighted_sum(&x, &w).unwrap();
        for t in [0usize, 7, 299] {
            let alone = c
                .weighted_sum(&x.narrow(0, t, 1).unwrap(), &w.narrow(0, t, 1).unwrap())
                .unwrap();
            let row = whole.narrow(0, t, 1).unwrap();
            assert_bitwise(
                &alone,
                &row,
                &format!("weighted_sum row {t} [{}]", cpu.name),
            );
        }
        assert!(c.handoffs().is_empty(), "{}: {:?}", cpu.name, c.handoffs());
    }
}
