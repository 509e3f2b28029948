//! `expert_linear` grouped by expert on the device: uneven routing (one expert with most
//! rows, partial tiles, an expert no row chose), expert stacks bound a window at a time,
//! and rows whose id no expert has (NaN, the others unaffected).

use tempra_backend_gpu::GpuOptions;
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::common::{assert_close, backend_with, bytes_pair, randn_pair, tol};

/// Expert ids `[tokens, slots]`: expert 0 takes most rows, the others a few each, the
/// last expert none; `bad` rows (flat indices) get an id past the stack.
fn uneven_ids(tokens: usize, slots: usize, experts: usize, bad: &[usize]) -> Vec<u32> {
    (0..tokens * slots)
        .map(|i| {
            if bad.contains(&i) {
                experts as u32 + 7
            } else if i % 3 == 0 {
                (i % (experts - 1)) as u32
            } else {
                0
            }
        })
        .collect()
}

/// Checks `g.expert_linear` against the reference over `x [tokens, slots or 1, k]`, with
/// NaN expected in the rows of `bad` (the reference runs those rows on expert 0, then
/// their outputs are set to NaN).
fn check(
    g: &ExecContext,
    r: &ExecContext,
    dtype: DType,
    dims: [usize; 4],
    shared_rows: bool,
    bad: &[usize],
) -> anyhow::Result<()> {
    let [experts, n, k, tokens] = dims;
    let slots = 3;
    let w = r.randn(&[experts, n, k], DType::F32, 0.0, 0.5, 900)?;
    let host = if dtype.is_quantized() {
        r.quantize(&w, dtype)?
    } else {
        r.cast(&w, dtype)?
    };
    let (wg, wr) = bytes_pair(g, r, &host)?;
    let x_rows = if shared_rows { 1 } else { slots };
    let (xg, xr) = randn_pair(g, r, &[tokens, x_rows, k], DType::F32, 901)?;
    let ids = uneven_ids(tokens, slots, experts, bad);
    let good: Vec<u32> = ids
        .iter()
        .map(|&e| if e as usize >= experts { 0 } else { e })
        .collect();
    let ig = g.from_slice(&ids, &[tokens, slots])?;
    let ir = r.from_slice(&good, &[tokens, slots])?;
    let (bg, br) = randn_pair(g, r, &[experts, n], DType::F32, 902)?;
    let got = g.expert_linear(&xg, &wg, &ig, Some(&bg))?;
    let mut expected = r.expert_linear(&xr, &wr, &ir, Some(&br))?.to_vec_f32()?;
    for &row in bad {
        expected[row * n..(row + 1) * n].fill(f32::NAN);
    }
    let expected = Tensor::owned_from_slice(&expected, &[tokens, slots, n])?;
    let t = if dtype.is_quantized() {
        tol::F16_DEQUANT
    } else {
        tol::SUM_F32
    };
    assert_close(
        &got,
        &expected,
        t,
        &format!("expert_linear {dtype} {dims:?} shared rows {shared_rows}, bad rows {bad:?}"),
    )
}

#[test]
fn rows_grouped_by_expert_in_windows_and_past_the_stack() -> anyhow::Result<()> {
    let (_gpu, g, r) = crate::setup!("rows_grouped_by_expert");
    // 37 tokens × 3 slots: 111 rows, 74 of them on expert 0 (tiles of four and a partial
    // one), one id past the stack in a full tile and one alone.
    check(&g, &r, DType::F32, [5, 19, 67, 37], false, &[])?;
    check(&g, &r, DType::Q8_0, [5, 24, 256, 37], true, &[4, 57])?;
    check(&g, &r, DType::Q4K, [5, 24, 256, 37], false, &[110])?;
    // A binding of 16 KiB holds a Q8_0 expert of [24, 256] (6.4 KiB) at most twice: the
    // stack runs in windows, each dispatch taking its experts' tiles (5 tokens, so that
    // the input fits one binding).
    let options = GpuOptions {
        max_binding_bytes: Some(16 * 1024),
        ..GpuOptions::from_env()
    };
    let Some(windowed) = backend_with(&options, "windowed experts") else {
        return Ok(());
    };
    check(
        &windowed.exec_context(),
        &r,
        DType::Q8_0,
        [7, 24, 256, 5],
        false,
        &[3],
    )
}

/// The grouping of rows by expert is the kernel's own buffer, not a pooled lease: a call
/// leases its output and nothing else, so a decode step's pool traffic does not depend on
/// whether the GPU has finished the call before (a pooled block is handed out again only
/// then), however many rows a call has once the buffer is large enough.
#[test]
fn the_grouping_leases_nothing_from_the_pool() -> anyhow::Result<()> {
    let (gpu, g, r) = crate::setup_own!("grouping_scratch");
    let (experts, n, k) = (4, 16, 64);
    let w = r.randn(&[experts, n, k], DType::F32, 0.0, 0.5, 910)?;
    let (wg, _) = bytes_pair(&g, &r, &r.quantize(&w, DType::Q8_0)?)?;
    let call = |tokens: usize| -> anyhow::Result<u64> {
        let (xg, _) = randn_pair(&g, &r, &[tokens, 2, k], DType::F32, 911)?;
        let ids = g.from_slice(&uneven_ids(tokens, 2, experts, &[]), &[tokens, 2])?;
        let before = gpu.pool().stats();
        g.expert_linear(&xg, &wg, &ids, None)?;
        let after = gpu.pool().stats();
        Ok((after.hits + after.misses) - (before.hits + before.misses))
    };
    for tokens in [9, 9, 3, 1] {
        let leases = call(tokens)?;
        anyhow::ensure!(
            leases == 1,
            "{tokens} tokens: {leases} leases, not the output only"
        );
    }
    Ok(())
}
