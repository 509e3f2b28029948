//! rope (interleaved and NeoX, partial rotary dims, frequency factors, scaling, inverse)
//! against the reference.

mod common;

use common::{check, randn};
use tempra_tensor::{DType, ExecContext, Result, RopeConfig, RopeScaling, RopeStyle, Tensor};

/// Angles and sin/cos in f64 like the reference; the rotation in f32.
const TOL: f64 = 1e-12;

fn positions(ctx: &ExecContext, t: usize, start: u32) -> Result<Tensor> {
    let p: Vec<u32> = (0..t as u32).map(|i| start + 7 * i).collect();
    ctx.from_slice(&p, &[t])
}

#[test]
fn rope_styles_dims_and_views() {
    for style in [RopeStyle::Interleaved, RopeStyle::Neox] {
        for (t, h, d, rd) in [
            (1, 1, 2, 2),
            (3, 5, 64, 64),
            (17, 3, 34, 34),
            (5, 4, 80, 32),
            (2, 2, 258, 256),
            (4, 3, 17, 16),
        ] {
            let config = RopeConfig::new(rd, 10_000.0, style);
            for inverse in [false, true] {
                check(
                    &format!("{style:?} t{t} h{h} d{d} rd{rd} inv {inverse}"),
                    TOL,
                    |ctx| {
                        let x = randn(ctx, &[t, h, d], DType::F32, (t * d) as u64);
                        let p = positions(ctx, t, 3)?;
                        if inverse {
                            ctx.rope_inverse(&x, &p, &config, None)
                        } else {
                            ctx.rope(&x, &p, &config, None)
                        }
                    },
                );
            }
        }
        let config = RopeConfig::new(64, 500_000.0, style);
        check(&format!("{style:?} batched, permuted"), TOL, |ctx| {
            let x = randn(ctx, &[2, 8, 9, 64], DType::F32, 1).permute(&[0, 2, 1, 3])?; // [2, 9, 8, 64]
            ctx.rope(&x, &positions(ctx, 9, 100_000)?, &config, None)
        });
        check(&format!("{style:?} strided head dim"), TOL, |ctx| {
            let x = randn(ctx, &[3, 2, 64, 2], DType::F32, 2)
                .narrow(3, 1, 1)?
                .squeeze(3)?; // [3, 2, 64]
            ctx.rope(&x, &positions(ctx, 3, 0)?, &config, None)
        });
        check(&format!("{style:?} strided positions"), TOL, |ctx| {
            let p = positions(ctx, 10, 5)?.narrow(0, 1, 8)?;
            let p = ctx
                .contiguous(&p)?
                .reshape(&[4, 2])?
                .narrow(1, 0, 1)?
                .squeeze(1)?;
            ctx.rope(&randn(ctx, &[4, 3, 64], DType::F32, 3), &p, &config, None)
        });
        let llama3 = RopeConfig {
            scaling: RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position: 8192.0,
            },
            ..RopeConfig::new(64, 500_000.0, style)
        };
        check(
            &format!("{style:?} llama3 scaling + freq factors"),
            TOL,
            |ctx| {
                let ff: Vec<f32> = (0..32).map(|i| 1.0 + i as f32 * 0.1).collect();
                let ff = ctx.from_slice(&ff, &[32])?;
                ctx.rope(
                    &randn(ctx, &[6, 4, 64], DType::F32, 4),
                    &positions(ctx, 6, 9000)?,
                    &llama3,
                    Some(&ff),
                )
            },
        );
        let linear = RopeConfig {
            scaling: RopeScaling::Linear { factor: 4.0 },
            ..RopeConfig::new(48, 10_000.0, style)
        };
        check(
            &format!("{style:?} linear scaling, many tokens"),
            TOL,
            |ctx| {
                ctx.rope(
                    &randn(ctx, &[130, 8, 64], DType::F32, 5),
                    &positions(ctx, 130, 0)?,
                    &linear,
                    None,
                )
            },
        );
    }
}
