//! Norms, rope and embedding.

use tempra_tensor::{DType, RopeConfig, RopeScaling, RopeStyle};

use crate::common::{assert_close, bytes_pair, randn_pair, tol};
use crate::linalg::weight_pair;
use crate::setup;

#[test]
fn rms_and_layer_norm_with_half_weights() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("rms_and_layer_norm_with_half_weights");
    let (xg, xr) = randn_pair(&g, &r, &[5, 3, 77], DType::F32, 80)?;
    let (x2g, x2r) = (xg.narrow(2, 4, 50)?, xr.narrow(2, 4, 50)?);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let (wg, wr) = randn_pair(&g, &r, &[77], dtype, 81)?;
        let (bg, br) = randn_pair(&g, &r, &[77], dtype, 82)?;
        assert_close(
            &g.rms_norm(&xg, &wg, 1e-6)?,
            &r.rms_norm(&xr, &wr, 1e-6)?,
            tol::SUM_F32,
            &format!("rms_norm {dtype}"),
        )?;
        assert_close(
            &g.layer_norm(&xg, &wg, Some(&bg), 1e-5)?,
            &r.layer_norm(&xr, &wr, Some(&br), 1e-5)?,
            tol::SUM_F32,
            &format!("layer_norm {dtype}"),
        )?;
        assert_close(
            &g.layer_norm(&xg, &wg, None, 1e-5)?,
            &r.layer_norm(&xr, &wr, None, 1e-5)?,
            tol::SUM_F32,
            &format!("layer_norm {dtype} no bias"),
        )?;
        // Strided input and a strided (every other element) weight.
        let (w2g, w2r) = randn_pair(&g, &r, &[100], dtype, 83)?;
        let idx = |t: &tempra_tensor::Tensor| t.reshape(&[50, 2]).and_then(|v| v.select(1, 0));
        assert_close(
            &g.rms_norm(&x2g, &idx(&w2g)?, 1e-6)?,
            &r.rms_norm(&x2r, &idx(&w2r)?, 1e-6)?,
            tol::SUM_F32,
            &format!("rms_norm {dtype} strided"),
        )?;
    }
    Ok(())
}

#[test]
fn rope_styles_scalings_factors_inverse() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("rope_styles_scalings_factors_inverse");
    let (t, h, d) = (7, 3, 20);
    let (xg, xr) = randn_pair(&g, &r, &[2, t, h, d], DType::F32, 90)?;
    let positions: Vec<u32> = (0..t as u32).map(|i| 3 + 5 * i).collect();
    let (pg, pr) = (
        g.from_slice(&positions, &[t])?,
        r.from_slice(&positions, &[t])?,
    );
    let factors: Vec<f32> = (0..8).map(|i| 1.0 + i as f32 * 0.25).collect();
    let (fg, fr) = (g.from_slice(&factors, &[8])?, r.from_slice(&factors, &[8])?);
    let llama3 = RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position: 64.0,
    };
    for style in [RopeStyle::Interleaved, RopeStyle::Neox] {
        for scaling in [
            RopeScaling::None,
            RopeScaling::Linear { factor: 2.0 },
            llama3,
        ] {
            let mut config = RopeConfig::new(16, 10000.0, style);
            config.scaling = scaling;
            let what = format!("rope {style:?} {scaling:?}");
            assert_close(
                &g.rope(&xg, &pg, &config, None)?,
                &r.rope(&xr, &pr, &config, None)?,
                1e-5,
                &what,
            )?;
            assert_close(
                &g.rope(&xg, &pg, &config, Some(&fg))?,
                &r.rope(&xr, &pr, &config, Some(&fr))?,
                1e-5,
                &format!("{what} factors"),
            )?;
            assert_close(
                &g.rope_inverse(&xg, &pg, &config, None)?,
                &r.rope_inverse(&xr, &pr, &config, None)?,
                1e-5,
                &format!("{what} inverse"),
            )?;
        }
    }
    // A strided view: x stored [2, h, t, d], viewed as [2, t, h, d].
    let (sg, sr) = randn_pair(&g, &r, &[2, h, t, d], DType::F32, 91)?;
    let (sg, sr) = (sg.transpose(1, 2)?, sr.transpose(1, 2)?);
    let config = RopeConfig::new(20, 500.0, RopeStyle::Neox);
    assert_close(
        &g.rope(&sg, &pg, &config, None)?,
        &r.rope(&sr, &pr, &config, None)?,
        1e-5,
        "rope strided",
    )?;
    Ok(())
}

#[test]
fn embedding_every_table_dtype() -> anyhow::Result<()> {
    let (_, g, r) = setup!("embedding_every_table_dtype");
    let ids: Vec<u32> = vec![3, 0, 10, 3, 7, 1];
    let (ig, ir) = (g.from_slice(&ids, &[2, 3])?, r.from_slice(&ids, &[2, 3])?);
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ] {
        let d = if dtype.block_len() == 256 { 256 } else { 64 };
        let (tg, tr) = weight_pair(&g, &r, 11, d, dtype, 100)?;
        assert_close(
            &g.embedding(&tg, &ig)?,
            &r.embedding(&tr, &ir)?,
            tol::EXACT_F32,
            &format!("embedding {dtype}"),
        )?;
        assert_close(
            &g.embedding(&tg, &ig.t()?)?,
            &r.embedding(&tr, &ir.t()?)?,
            tol::EXACT_F32,
            &format!("embedding {dtype} transposed ids"),
        )?;
    }
    // A strided f32 table (a column slice).
    let (tg, tr) = randn_pair(&g, &r, &[11, 40], DType::F32, 101)?;
    let (tg, tr) = (tg.narrow(1, 5, 30)?, tr.narrow(1, 5, 30)?);
    assert_close(
        &g.embedding(&tg, &ig)?,
        &r.embedding(&tr, &ir)?,
        tol::EXACT_F32,
        "embedding strided table",
    )?;
    anyhow::ensure!(!g.handoffs().contains_key("embedding"));
    // An id past the vocabulary is an error naming it.
    let bad = g.from_slice(&[1u32, 11], &[2])?;
    let err = g.embedding(&tg, &bad).expect_err("id 11 of 11 rows");
    anyhow::ensure!(err.to_string().contains("id 11 at position 1"), "{err}");
    // A block format without a shader runs on the host.
    let host = r.quantize(&r.randn(&[4, 32], DType::F32, 0.0, 1.0, 102)?, DType::Q4_1)?;
    let (qg, qr) = bytes_pair(&g, &r, &host)?;
    let few = [0u32, 3, 2];
    let (fg, fr) = (g.from_slice(&few, &[3])?, r.from_slice(&few, &[3])?);
    assert_close(
        &g.embedding(&qg, &fg)?,
        &r.embedding(&qr, &fr)?,
        tol::EXACT_F32,
        "embedding q4_1",
    )?;
    Ok(())
}
