//! Bindings split into windows (a small binding cap makes small tensors "large") and
//! dispatches split into 2-D grids (a small per-dimension cap).

use tempra_backend_gpu::GpuOptions;
use tempra_tensor::{AttentionParams, DType, ExecContext};

use crate::common::{assert_close, backend_with, randn_pair, tol};
use crate::linalg::weight_pair;

#[test]
fn weights_tables_and_dense_operands_in_windows() -> anyhow::Result<()> {
    let options = GpuOptions {
        max_binding_bytes: Some(16 * 1024),
        ..GpuOptions::from_env()
    };
    let Some(gpu) = backend_with(&options, "windowed bindings") else {
        return Ok(());
    };
    let (g, r) = (gpu.exec_context(), ExecContext::reference());
    for (dtype, n, k) in [
        (DType::F32, 40, 512),
        (DType::F16, 70, 256),
        (DType::Q8_0, 300, 96),
        (DType::Q4K, 100, 512),
        (DType::Q6K, 90, 256),
    ] {
        let (wg, wr) = weight_pair(&g, &r, n, k, dtype, 300)?;
        let (xg, xr) = randn_pair(&g, &r, &[3, k], DType::F32, 301)?;
        let (bg, br) = randn_pair(&g, &r, &[n], DType::F32, 302)?;
        let t = if dtype.is_quantized() && gpu.has_f16() {
            tol::F16_DEQUANT
        } else {
            tol::SUM_F32
        };
        assert_close(
            &g.linear(&xg, &wg, Some(&bg))?,
            &r.linear(&xr, &wr, Some(&br))?,
            t,
            &format!("windowed linear {dtype}"),
        )?;
        let ids: Vec<u32> = vec![0, (n - 1) as u32, (n / 2) as u32, 7];
        let (ig, ir) = (g.from_slice(&ids, &[4])?, r.from_slice(&ids, &[4])?);
        assert_close(
            &g.embedding(&wg, &ig)?,
            &r.embedding(&wr, &ir)?,
            tol::EXACT_F32,
            &format!("windowed embedding {dtype}"),
        )?;
    }
    // Dense elementwise operands of 80 KB run in element ranges.
    let (xg, xr) = randn_pair(&g, &r, &[20_000], DType::F32, 303)?;
    let (yg, yr) = randn_pair(&g, &r, &[20_000], DType::F32, 304)?;
    assert_close(
        &g.exp(&xg)?,
        &r.exp(&xr)?,
        tol::TRANSCENDENTAL,
        "chunked exp",
    )?;
    assert_close(
        &g.mul(&xg, &yg)?,
        &r.mul(&xr, &yr)?,
        tol::EXACT_F32,
        "chunked mul",
    )?;
    let (sg, sr) = (
        g.from_slice(&[2.0f32], &[1])?,
        r.from_slice(&[2.0f32], &[1])?,
    );
    assert_close(
        &g.add(&xg, &sg)?,
        &r.add(&xr, &sr)?,
        tol::EXACT_F32,
        "chunked broadcast add",
    )?;
    assert_close(
        &g.contiguous(&xg.narrow(0, 1, 19_000)?)?,
        &r.contiguous(&xr.narrow(0, 1, 19_000)?)?,
        0.0,
        "big copy",
    )?;
    // A strided operand over the cap is a clear error, not a wrong answer.
    let (mg, _) = randn_pair(&g, &r, &[100, 200], DType::F32, 305)?;
    let err = g.exp(&mg.t()?).expect_err("a strided 80 KB operand");
    anyhow::ensure!(err.to_string().contains("binds at most"), "{err}");
    Ok(())
}

#[test]
fn dispatches_beyond_the_per_dimension_limit_use_2d_grids() -> anyhow::Result<()> {
    let options = GpuOptions {
        max_workgroups_per_dim: Some(3),
        ..GpuOptions::from_env()
    };
    let Some(gpu) = backend_with(&options, "2-D dispatch") else {
        return Ok(());
    };
    let (g, r) = (gpu.exec_context(), ExecContext::reference());
    let (xg, xr) = randn_pair(&g, &r, &[10, 257], DType::F32, 310)?;
    assert_close(
        &g.silu(&xg)?,
        &r.silu(&xr)?,
        tol::TRANSCENDENTAL,
        "2-D silu",
    )?;
    assert_close(
        &g.sum(&xg, 1, false)?,
        &r.sum(&xr, 1, false)?,
        tol::SUM_F32,
        "2-D sum",
    )?;
    assert_close(
        &g.softmax(&xg)?,
        &r.softmax(&xr)?,
        tol::SUM_F32,
        "2-D softmax",
    )?;
    let (wg, wr) = randn_pair(&g, &r, &[257, 130], DType::F32, 311)?;
    assert_close(
        &g.matmul(&xg, &wg)?,
        &r.matmul(&xr, &wr)?,
        tol::SUM_F32,
        "2-D matmul",
    )?;
    let (lg, lr) = weight_pair(&g, &r, 11, 257 - 1, DType::Q8_0, 312)?;
    let (x2g, x2r) = (xg.narrow(1, 0, 256)?, xr.narrow(1, 0, 256)?);
    let t = if gpu.has_f16() {
        tol::F16_DEQUANT
    } else {
        tol::SUM_F32
    };
    assert_close(
        &g.linear(&x2g, &lg, None)?,
        &r.linear(&x2r, &lr, None)?,
        t,
        "2-D linear",
    )?;
    let (qg, qr) = randn_pair(&g, &r, &[5, 4, 8], DType::F32, 313)?;
    let (kg, kr) = randn_pair(&g, &r, &[5, 2, 8], DType::F32, 314)?;
    let p = AttentionParams::causal(8, 0);
    assert_close(
        &g.attention(&qg, &kg, &kg, &p)?,
        &r.attention(&qr, &kr, &kr, &p)?,
        tol::SUM_F32,
        "2-D attention",
    )?;
    Ok(())
}
