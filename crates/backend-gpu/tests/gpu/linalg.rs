//! Tiled matmul (batched, broadcast, transposed, f16/bf16 inputs) and `linear` with
//! every weight dtype the shaders dequantize.

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::common::{assert_close, bytes_pair, randn_pair, tol};
use crate::setup;

#[test]
fn matmul_odd_batched_transposed() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("matmul_odd_batched_transposed");
    let (ag, ar) = randn_pair(&g, &r, &[37, 70], DType::F32, 21)?;
    let (bg, br) = randn_pair(&g, &r, &[70, 65], DType::F32, 22)?;
    assert_close(
        &g.matmul(&ag, &bg)?,
        &r.matmul(&ar, &br)?,
        tol::SUM_F32,
        "matmul 37x70x65",
    )?;
    // Transposed operands, read in place.
    let (ctg, ctr) = randn_pair(&g, &r, &[65, 70], DType::F32, 23)?;
    assert_close(
        &g.matmul(&ag, &ctg.t()?)?,
        &r.matmul(&ar, &ctr.t()?)?,
        tol::SUM_F32,
        "a·cᵀ",
    )?;
    assert_close(
        &g.matmul(&bg.t()?, &ag.t()?)?,
        &r.matmul(&br.t()?, &ar.t()?)?,
        tol::SUM_F32,
        "bᵀ·aᵀ",
    )?;
    // Broadcast batch dims.
    let (xg, xr) = randn_pair(&g, &r, &[2, 1, 9, 16], DType::F32, 24)?;
    let (yg, yr) = randn_pair(&g, &r, &[3, 16, 11], DType::F32, 25)?;
    assert_close(
        &g.matmul(&xg, &yg)?,
        &r.matmul(&xr, &yr)?,
        tol::SUM_F32,
        "batched broadcast",
    )?;
    // Half-precision inputs (exactly representable values; f32 accumulation).
    for dtype in [DType::F16, DType::BF16] {
        let (hg, hr) = (g.cast(&ag, dtype)?, r.cast(&ar, dtype)?);
        assert_close(
            &g.matmul(&hg, &bg)?,
            &r.matmul(&hr, &br)?,
            tol::SUM_F32,
            &format!("matmul {dtype}"),
        )?;
    }
    // An empty inner dim gives zeros.
    let (eg, er) = (g.zeros(&[3, 0], DType::F32)?, r.zeros(&[3, 0], DType::F32)?);
    let (fg, fr) = (g.zeros(&[0, 4], DType::F32)?, r.zeros(&[0, 4], DType::F32)?);
    assert_close(&g.matmul(&eg, &fg)?, &r.matmul(&er, &fr)?, 0.0, "k = 0")?;
    Ok(())
}

/// A weight `[n, k]` of `dtype` made on the host (quantized by the reference) and the
/// same bytes on both contexts.
pub(crate) fn weight_pair(
    g: &ExecContext,
    r: &ExecContext,
    n: usize,
    k: usize,
    dtype: DType,
    seed: u64,
) -> anyhow::Result<(Tensor, Tensor)> {
    let w = r.randn(&[n, k], DType::F32, 0.0, 0.5, seed)?;
    let host = if dtype.is_quantized() {
        r.quantize(&w, dtype)?
    } else {
        r.cast(&w, dtype)?
    };
    bytes_pair(g, r, &host)
}

#[test]
fn linear_every_weight_dtype() -> anyhow::Result<()> {
    let (gpu, g, r) = setup!("linear_every_weight_dtype");
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ];
    for (i, dtype) in dtypes.into_iter().enumerate() {
        let k = if dtype.block_len() == 256 { 512 } else { 96 };
        let n = 37;
        let (wg, wr) = weight_pair(&g, &r, n, k, dtype, 30 + i as u64)?;
        let t = if dtype.is_quantized() && gpu.has_f16() {
            tol::F16_DEQUANT
        } else {
            tol::SUM_F32
        };
        for m in [1, 6] {
            // A strided input: rows of a wider tensor.
            let (bigg, bigr) = randn_pair(&g, &r, &[m, k + 5], DType::F32, 40 + i as u64)?;
            let (xg, xr) = (bigg.narrow(1, 2, k)?, bigr.narrow(1, 2, k)?);
            let (bg, br) = randn_pair(&g, &r, &[n], DType::F32, 50 + i as u64)?;
            let what = format!("linear {dtype} m={m}");
            assert_close(
                &g.linear(&xg, &wg, None)?,
                &r.linear(&xr, &wr, None)?,
                t,
                &what,
            )?;
            assert_close(
                &g.linear(&xg, &wg, Some(&bg))?,
                &r.linear(&xr, &wr, Some(&br))?,
                t,
                &format!("{what} bias"),
            )?;
        }
        // A leading batch dim.
        let (xg, xr) = randn_pair(&g, &r, &[2, 3, k], DType::F32, 60 + i as u64)?;
        assert_close(
            &g.linear(&xg, &wg, None)?,
            &r.linear(&xr, &wr, None)?,
            t,
            &format!("linear {dtype} 3-d"),
        )?;
    }
    // A transposed f32 weight is read in place.
    let (wg, wr) = randn_pair(&g, &r, &[40, 29], DType::F32, 70)?;
    let (xg, xr) = randn_pair(&g, &r, &[3, 40], DType::F32, 71)?;
    assert_close(
        &g.linear(&xg, &wg.t()?, None)?,
        &r.linear(&xr, &wr.t()?, None)?,
        tol::SUM_F32,
        "linear wᵀ",
    )?;
    anyhow::ensure!(
        !g.handoffs().contains_key("linear"),
        "linear fell back to the host"
    );
    Ok(())
}
