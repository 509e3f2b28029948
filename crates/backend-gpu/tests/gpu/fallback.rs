//! Ops that run on the host (F64, quantize, training ops) give the reference's results
//! through the facade, and host tensors mix with device tensors.

use tempra_tensor::{AttentionParams, DType};

use crate::common::{assert_close, randn_pair, tol};
use crate::{setup, setup_own};

#[test]
fn f64_ops_fall_back_exactly() -> anyhow::Result<()> {
    let (_, g, r) = setup_own!("f64_ops_fall_back_exactly");
    let (ag, ar) = randn_pair(&g, &r, &[5, 7], DType::F64, 170)?;
    let (bg, br) = randn_pair(&g, &r, &[7, 3], DType::F64, 171)?;
    assert_close(
        &g.matmul(&ag, &bg)?,
        &r.matmul(&ar, &br)?,
        0.0,
        "matmul f64",
    )?;
    assert_close(
        &g.exp(&ag.t()?)?,
        &r.exp(&ar.t()?)?,
        0.0,
        "exp f64 transposed",
    )?;
    assert_close(&g.softmax(&ag)?, &r.softmax(&ar)?, 0.0, "softmax f64")?;
    assert_close(
        &g.sum(&ag, 1, false)?,
        &r.sum(&ar, 1, false)?,
        0.0,
        "sum f64",
    )?;
    // f64 copies within f64 run on the GPU; conversions fall back.
    assert_close(
        &g.contiguous(&ag.t()?)?,
        &r.contiguous(&ar.t()?)?,
        0.0,
        "contiguous f64",
    )?;
    assert_close(
        &g.cast(&ag, DType::F32)?,
        &r.cast(&ar, DType::F32)?,
        0.0,
        "f64 -> f32",
    )?;
    let counts = g.handoffs();
    anyhow::ensure!(counts.get("matmul").is_some_and(|&n| n >= 1), "{counts:?}");
    Ok(())
}

#[test]
fn training_ops_and_quantize_on_the_host() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup_own!("training_ops_and_quantize_on_the_host");
    let (lg, lr) = randn_pair(&g, &r, &[4, 9], DType::F32, 180)?;
    let targets = [1u32, 8, 0, 5];
    let (tg, tr) = (g.from_slice(&targets, &[4])?, r.from_slice(&targets, &[4])?);
    assert_close(
        &g.cross_entropy(&lg, &tg, Some(5))?,
        &r.cross_entropy(&lr, &tr, Some(5))?,
        0.0,
        "cross_entropy",
    )?;
    let (gg, gr) = randn_pair(&g, &r, &[4], DType::F32, 181)?;
    assert_close(
        &g.cross_entropy_backward(&lg, &tg, None, &gg)?,
        &r.cross_entropy_backward(&lr, &tr, None, &gr)?,
        0.0,
        "cross_entropy_backward",
    )?;
    assert_close(
        &g.one_hot(&tg, 9, DType::F32)?,
        &r.one_hot(&tr, 9, DType::F32)?,
        0.0,
        "one_hot",
    )?;
    let (eg, er) = randn_pair(&g, &r, &[4, 6], DType::F32, 182)?;
    assert_close(
        &g.embedding_backward(&tg, &eg, 10)?,
        &r.embedding_backward(&tr, &er, 10)?,
        0.0,
        "embedding_backward",
    )?;
    let (qg, qr) = randn_pair(&g, &r, &[3, 5, 2, 8], DType::F32, 183)?;
    let (kg, kr) = randn_pair(&g, &r, &[3, 5, 1, 8], DType::F32, 184)?;
    let (vg, vr) = randn_pair(&g, &r, &[3, 5, 1, 8], DType::F32, 185)?;
    let (og, or) = randn_pair(&g, &r, &[3, 5, 2, 8], DType::F32, 186)?;
    let p = AttentionParams::causal(8, 0);
    let (a, b) = (
        g.attention_backward(&qg, &kg, &vg, &p, &og)?,
        r.attention_backward(&qr, &kr, &vr, &p, &or)?,
    );
    assert_close(&a.0, &b.0, 0.0, "dq")?;
    assert_close(&a.1, &b.1, 0.0, "dk")?;
    assert_close(&a.2, &b.2, 0.0, "dv")?;
    let (wg, wr) = randn_pair(&g, &r, &[4, 64], DType::F32, 187)?;
    for dtype in [DType::Q8_0, DType::Q4K] {
        let k = if dtype == DType::Q4K { 256 } else { 64 };
        let (wg, wr) = if k == 64 {
            (wg.clone(), wr.clone())
        } else {
            randn_pair(&g, &r, &[2, 256], DType::F32, 188)?
        };
        assert_close(
            &g.quantize(&wg, dtype)?,
            &r.quantize(&wr, dtype)?,
            0.0,
            &format!("quantize {dtype}"),
        )?;
    }
    Ok(())
}

#[test]
fn host_tensors_mix_with_device_tensors() -> anyhow::Result<()> {
    let (gpu, g, r) = setup!("host_tensors_mix_with_device_tensors");
    let (ag, ar) = randn_pair(&g, &r, &[6, 10], DType::F32, 190)?;
    // `br` lives on the host: the GPU op uploads it into a scratch lease.
    let br = r.randn(&[10], DType::F32, 0.0, 1.0, 191)?;
    assert_close(
        &g.add(&ag, &br)?,
        &r.add(&ar, &br)?,
        tol::EXACT_F32,
        "device + host",
    )?;
    assert_close(
        &g.matmul(&ar.t()?, &ag)?,
        &r.matmul(&ar.t()?, &ar)?,
        tol::SUM_F32,
        "host · device",
    )?;
    // Converting a device tensor to the host and back.
    let host = gpu.to_host(&ag.t()?)?;
    anyhow::ensure!(host.storage().is_host());
    assert_close(&host, &ar.t()?, 0.0, "to_host view")?;
    let back = gpu.upload(&host)?;
    anyhow::ensure!(gpu.owns(&back) && back.is_contiguous());
    assert_close(&back, &ar.t()?, 0.0, "upload")?;
    Ok(())
}
