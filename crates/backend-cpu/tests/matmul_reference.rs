//! `matmul` on the CPU backend against the ReferenceBackend (the spec): odd shapes,
//! transposed, strided and broadcast-batch views, F16/BF16 inputs.
//!
//! Budget: normalized MSE ≤ 1e-9. The reference accumulates in f64; the GEMM in f32
//! with blocked partial sums, whose relative error grows like ε·√K (≈ 2e-6 at K = 600,
//! an NMSE near 1e-12). F16/BF16 inputs convert to f32 exactly, so the same budget holds.

mod products;

use products::{cpu_contexts, float_tensor, nmse, normal};
use tempra_tensor::{DType, ExecContext, Tensor};

const BUDGET: f64 = 1e-9;

fn check(label: &str, a: &Tensor, b: &Tensor) {
    let reference = ExecContext::reference();
    let want = reference.matmul(a, b).unwrap();
    for (name, ctx) in cpu_contexts() {
        let got = ctx.matmul(a, b).unwrap();
        assert_eq!(got.dims(), want.dims(), "{label} on {name}");
        let e = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
        assert!(e <= BUDGET, "{label} on {name}: nmse {e:e} > {BUDGET:e}");
    }
}

#[test]
fn odd_shapes() {
    let shapes = [
        (1, 1, 1),
        (1, 17, 33),
        (3, 1, 17),
        (17, 33, 3),
        (33, 17, 255),
        (255, 3, 33),
        (7, 257, 17),
        (150, 40, 600),
        (66, 70, 257),
    ];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let a = float_tensor(&normal(m * k, i as u64), &[m, k], DType::F32);
        let b = float_tensor(&normal(k * n, 100 + i as u64), &[k, n], DType::F32);
        check(&format!("{m}x{n}x{k}"), &a, &b);
    }
}

#[test]
fn empty_depth_gives_zeros() {
    let a = float_tensor(&[], &[3, 0], DType::F32);
    let b = float_tensor(&[], &[0, 5], DType::F32);
    check("k=0", &a, &b);
}

#[test]
fn transposed_views_are_read_in_place() {
    let (m, n, k) = (33, 19, 70);
    let at = float_tensor(&normal(m * k, 1), &[k, m], DType::F32)
        .t()
        .unwrap();
    let bt = float_tensor(&normal(k * n, 2), &[n, k], DType::F32)
        .t()
        .unwrap();
    let a = float_tensor(&normal(m * k, 3), &[m, k], DType::F32);
    let b = float_tensor(&normal(k * n, 4), &[k, n], DType::F32);
    check("aᵀ·b", &at, &b);
    check("a·bᵀ", &a, &bt);
    check("aᵀ·bᵀ", &at, &bt);
}

#[test]
fn strided_views() {
    // Every other column of a wider matrix, and a narrowed window of rows.
    let (m, n, k) = (17, 23, 40);
    let wide = float_tensor(&normal(m * 2 * k, 5), &[m, 2 * k], DType::F32);
    let a = wide.reshape(&[m, k, 2]).unwrap().select(2, 1).unwrap();
    assert!(!a.is_contiguous());
    let tall = float_tensor(&normal((k + 9) * (n + 4), 6), &[k + 9, n + 4], DType::F32);
    let b = tall.narrow(0, 5, k).unwrap().narrow(1, 3, n).unwrap();
    check("strided", &a, &b);
}

#[test]
fn broadcast_batches() {
    let (m, n, k) = (9, 14, 21);
    let a = float_tensor(&normal(2 * 3 * m * k, 7), &[2, 3, m, k], DType::F32);
    let b = float_tensor(&normal(k * n, 8), &[k, n], DType::F32);
    check("batch × shared b", &a, &b);
    let b3 = float_tensor(&normal(3 * k * n, 9), &[3, k, n], DType::F32);
    check("batch × per-head b", &a, &b3);
    let a1 = float_tensor(&normal(2 * m * k, 10), &[2, 1, m, k], DType::F32);
    check("broadcast a over heads", &a1, &b3);
    // Many small products (attention-like): batches run in parallel.
    let q = float_tensor(&normal(32 * k, 11), &[32, 1, k], DType::F32);
    let kt = float_tensor(&normal(32 * 40 * k, 12), &[32, 40, k], DType::F32)
        .transpose(1, 2)
        .unwrap();
    check("32 heads of 1×k·k×40", &q, &kt);
}

#[test]
fn half_precision_inputs() {
    let (m, n, k) = (19, 37, 45);
    for (da, db) in [
        (DType::F16, DType::F32),
        (DType::F32, DType::BF16),
        (DType::BF16, DType::F16),
    ] {
        let a = float_tensor(&normal(m * k, 13), &[m, k], da);
        let b = float_tensor(&normal(k * n, 14), &[k, n], db);
        check(&format!("{da}·{db}"), &a, &b);
        let bt = float_tensor(&normal(k * n, 15), &[n, k], db).t().unwrap();
        check(&format!("{da}·{db}ᵀ"), &a, &bt);
    }
}

#[test]
fn threaded_and_single_threaded_agree_bitwise() {
    // Large enough to be split over threads; every task computes its tiles with the same
    // blocking and summation order, so per ISA the results are identical, not just close.
    // The shapes take both schedules at 3 threads: few rows (tasks split the columns and
    // each packs A) and many rows (tasks pack a shared B block and split the rows), the
    // latter over several depth blocks and, with the scalar kernel, two column blocks.
    for (i, (m, n, k)) in [(40, 800, 300), (160, 200, 600), (150, 2100, 40)]
        .into_iter()
        .enumerate()
    {
        let a = float_tensor(&normal(m * k, 16 + i as u64), &[m, k], DType::F32);
        let b = float_tensor(&normal(k * n, 32 + i as u64), &[k, n], DType::F32);
        let results: Vec<(String, Vec<f32>)> = cpu_contexts()
            .into_iter()
            .map(|(name, ctx)| (name, ctx.matmul(&a, &b).unwrap().to_vec_f32().unwrap()))
            .collect();
        for pair in results.chunks(2) {
            assert_eq!(
                pair[0].1, pair[1].1,
                "{m}x{n}x{k}: {} vs {}",
                pair[0].0, pair[1].0
            );
        }
        check(&format!("threaded {m}x{n}x{k}"), &a, &b);
    }
}
