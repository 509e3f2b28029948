//! Causal attention: GQA, sliding window, soft-cap, a decode step over a cache, f16
//! keys and values, strided views.

use tempra_tensor::{AttentionParams, DType};

use crate::common::{assert_close, randn_pair, tol};
use crate::setup;

#[test]
fn attention_gqa_window_softcap() -> anyhow::Result<()> {
    let (_, g, r) = setup!("attention_gqa_window_softcap");
    let (tq, hq, hkv, d) = (9, 4, 2, 24);
    let (qg, qr) = randn_pair(&g, &r, &[2, tq, hq, d], DType::F32, 120)?;
    let (kg, kr) = randn_pair(&g, &r, &[2, tq, hkv, d], DType::F32, 121)?;
    let (vg, vr) = randn_pair(&g, &r, &[2, tq, hkv, 17], DType::F32, 122)?;
    let base = AttentionParams::causal(d, 0);
    let cases = [
        ("causal", base),
        (
            "window 3",
            AttentionParams {
                window: Some(3),
                ..base
            },
        ),
        (
            "softcap",
            AttentionParams {
                softcap: Some(2.0),
                scale: 1.0,
                ..base
            },
        ),
        (
            "window 1",
            AttentionParams {
                window: Some(1),
                ..base
            },
        ),
    ];
    for (what, params) in cases {
        assert_close(
            &g.attention(&qg, &kg, &vg, &params)?,
            &r.attention(&qr, &kr, &vr, &params)?,
            tol::SUM_F32,
            what,
        )?;
        // f16 keys and values.
        let (khg, khr) = (g.cast(&kg, DType::F16)?, r.cast(&kr, DType::F16)?);
        let (vhg, vhr) = (g.cast(&vg, DType::F16)?, r.cast(&vr, DType::F16)?);
        assert_close(
            &g.attention(&qg, &khg, &vhg, &params)?,
            &r.attention(&qr, &khr, &vhr, &params)?,
            tol::SUM_F32,
            &format!("{what} f16 kv"),
        )?;
    }
    anyhow::ensure!(!g.handoffs().contains_key("attention"));
    Ok(())
}

#[test]
fn attention_decode_over_a_cache_view() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("attention_decode_over_a_cache_view");
    // A cache of 100 positions, 70 filled (more than one 64-key chunk), as a narrow view;
    // 2 new queries at positions 68 and 69.
    let (hq, hkv, d) = (6, 2, 16);
    let (kc_g, kc_r) = randn_pair(&g, &r, &[100, hkv, d], DType::F16, 130)?;
    let (vc_g, vc_r) = randn_pair(&g, &r, &[100, hkv, d], DType::F16, 131)?;
    let (kg, kr) = (kc_g.narrow(0, 0, 70)?, kc_r.narrow(0, 0, 70)?);
    let (vg, vr) = (vc_g.narrow(0, 0, 70)?, vc_r.narrow(0, 0, 70)?);
    let (qg, qr) = randn_pair(&g, &r, &[2, hq, d], DType::F32, 132)?;
    for window in [None, Some(10), Some(66)] {
        let params = AttentionParams {
            window,
            ..AttentionParams::causal(d, 68)
        };
        assert_close(
            &g.attention(&qg, &kg, &vg, &params)?,
            &r.attention(&qr, &kr, &vr, &params)?,
            tol::SUM_F32,
            &format!("decode window {window:?}"),
        )?;
    }
    // Queries from a fused projection: a narrow of the last dim (strided rows).
    let (fused_g, fused_r) = randn_pair(&g, &r, &[2, hq, 3 * d], DType::F32, 133)?;
    let (qg, qr) = (fused_g.narrow(2, d, d)?, fused_r.narrow(2, d, d)?);
    let params = AttentionParams::causal(d, 68);
    assert_close(
        &g.attention(&qg, &kg, &vg, &params)?,
        &r.attention(&qr, &kr, &vr, &params)?,
        tol::SUM_F32,
        "strided q",
    )?;
    // Queries past every key of a window: zeros.
    let params = AttentionParams {
        window: Some(2),
        ..AttentionParams::causal(d, 80)
    };
    assert_close(
        &g.attention(&qg, &kg, &vg, &params)?,
        &r.attention(&qr, &kr, &vr, &params)?,
        0.0,
        "no visible key",
    )?;
    Ok(())
}
