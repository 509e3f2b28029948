//! upload, fill, copy (contiguous, cast, dequantizing cast, concat, write_slice) against
//! the reference. Conversions are exact, so the budget is 0.

mod common;

use common::{SIZES, check, cpus, randn, reference};
use tempra_tensor::{DType, ExecContext, Result, Tensor, quant};

const PLAIN: [DType; 7] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U32,
    DType::U8,
];

/// Values every plain dtype holds (small integers and halves, plus f32 detail).
fn source(ctx: &ExecContext, dims: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let x = ctx.randn(dims, DType::F64, 0.0, 50.0, seed)?;
    let x = if matches!(dtype, DType::U32 | DType::U8) {
        ctx.abs(&x)?
    } else {
        x
    };
    ctx.cast(&x, dtype)
}

#[test]
fn casts_between_every_plain_dtype_pair() {
    for from in PLAIN {
        for to in PLAIN {
            for &n in SIZES {
                check(&format!("cast {from}->{to} [{n}]"), 0.0, |ctx| {
                    ctx.cast(&source(ctx, &[n], from, n as u64)?, to)
                });
            }
            check(&format!("cast {from}->{to} transposed"), 0.0, |ctx| {
                ctx.cast(&source(ctx, &[17, 33], from, 5)?.t()?, to)
            });
        }
    }
}

#[test]
fn f32_half_conversions_round_like_the_reference() {
    // Values at and around f16/bf16 rounding boundaries, subnormals, overflow.
    let mut values = vec![
        65504.0f32,
        65520.0,
        1e5,
        6e-8,
        3e-8,
        1e-40,
        -0.0,
        1.0 + 1.0 / 2048.0,
        1.0 + 3.0 / 2048.0,
    ];
    values.extend((0..4096).map(|i| f32::from_bits(0x3f80_0000 + i * 1021)));
    values.extend((0..4096).map(|i| -f32::from_bits(0x0080_0000 + i * 997_001)));
    let n = values.len();
    for to in [DType::F16, DType::BF16] {
        check(&format!("f32->{to} boundaries"), 0.0, |ctx| {
            ctx.cast(&ctx.from_slice(&values, &[n])?, to)
        });
    }
}

#[test]
fn contiguous_copies_of_views() {
    for dtype in [DType::F32, DType::F16, DType::U8, DType::F64] {
        check(&format!("{dtype} permuted"), 0.0, |ctx| {
            ctx.contiguous(&source(ctx, &[3, 17, 33], dtype, 1)?.permute(&[2, 0, 1])?)
        });
        check(&format!("{dtype} narrowed"), 0.0, |ctx| {
            ctx.contiguous(&source(ctx, &[9, 40], dtype, 2)?.narrow(1, 5, 33)?)
        });
        check(&format!("{dtype} broadcast"), 0.0, |ctx| {
            ctx.contiguous(&source(ctx, &[1, 257], dtype, 3)?.broadcast_to(&[3, 257])?)
        });
        check(&format!("{dtype} large"), 0.0, |ctx| {
            ctx.contiguous(&source(ctx, &[300, 300], dtype, 4)?.t()?)
        });
    }
}

#[test]
fn concat_and_write_slice_into_a_cache() {
    check("concat dim 1", 0.0, |ctx| {
        let a = randn(ctx, &[3, 5, 8], DType::F32, 1);
        let b = randn(ctx, &[3, 8, 2], DType::F32, 2).t()?; // a transposed part
        ctx.concat(&[&a, &b], 1)
    });
    let rows = randn(&reference(), &[4, 3, 33], DType::F32, 9)
        .to_vec_f32()
        .unwrap();
    for cpu in cpus() {
        for cache_dtype in [DType::F16, DType::F32, DType::BF16] {
            // A `[H, T, D]` cache written along T: the destination region is strided.
            // One contiguous source, one permuted source; f32 converted to the cache dtype.
            let write = |ctx: &ExecContext, cache: &mut Tensor| {
                let src = ctx.from_slice(&rows, &[4, 3, 33]).unwrap();
                ctx.write_slice(cache, 1, 5, &src).unwrap();
                let t = ctx
                    .from_slice(&rows, &[3, 4, 33])
                    .unwrap()
                    .permute(&[1, 0, 2])
                    .unwrap();
                ctx.write_slice(cache, 1, 11, &t).unwrap();
            };
            let mut got = Tensor::owned_zeros(&[4, 16, 33], cache_dtype).unwrap();
            let mut want = Tensor::owned_zeros(&[4, 16, 33], cache_dtype).unwrap();
            write(&cpu.ctx, &mut got);
            write(&reference(), &mut want);
            assert_eq!(
                got.to_vec_f32().unwrap(),
                want.to_vec_f32().unwrap(),
                "{cache_dtype} cache write [{}]",
                cpu.name
            );
        }
    }
}

#[test]
fn fill_every_plain_dtype() {
    for dtype in PLAIN {
        for &n in SIZES {
            check(&format!("full {dtype} [{n}]"), 0.0, |ctx| {
                ctx.full(&[n, 3], dtype, 7.25)
            });
        }
        check(&format!("zeros {dtype} large"), 0.0, |ctx| {
            ctx.zeros(&[1 << 17], dtype)
        });
    }
}

#[test]
fn block_copies_and_dequantizing_casts() {
    for dtype in [
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4K,
        DType::Q6K,
        DType::Q2K,
    ] {
        let bl = dtype.block_len();
        let (rows, cols) = (5, 2 * bl);
        let values: Vec<f32> = (0..rows * cols)
            .map(|i| ((i as f32) * 0.37).sin() * 2.0)
            .collect();
        let mut bytes = vec![0u8; dtype.bytes_for(rows * cols).unwrap()];
        quant::quantize_row(dtype, &values, &mut bytes).unwrap();
        let q = |ctx: &ExecContext| ctx.from_bytes(&bytes, &[rows, cols], dtype);
        check(&format!("dequantize {dtype}"), 0.0, |ctx| {
            ctx.cast(&q(ctx)?, DType::F32)
        });
        check(&format!("dequantize {dtype} rows 1..4"), 0.0, |ctx| {
            ctx.cast(&q(ctx)?.narrow(0, 1, 3)?, DType::F32)
        });
        check(&format!("dequantize {dtype} to f16"), 0.0, |ctx| {
            ctx.cast(&q(ctx)?, DType::F16)
        });
        check(&format!("block copy {dtype}"), 0.0, |ctx| {
            let v = ctx.contiguous(&q(ctx)?.narrow(0, 1, 3)?)?;
            ctx.cast(&v, DType::F32)
        });
        check(&format!("block copy {dtype} strided"), 0.0, |ctx| {
            let v = ctx.contiguous(&q(ctx)?.narrow(1, bl, bl)?)?;
            ctx.cast(&v, DType::F32)
        });
    }
}

#[test]
fn upload_round_trips() {
    for &n in SIZES {
        check(&format!("from_slice [{n}]"), 0.0, |ctx| {
            ctx.from_slice(&vec![1.5f32; n], &[n])
        });
    }
    check("from_slice large", 0.0, |ctx| {
        ctx.from_slice(&vec![2u8; 1 << 20], &[1 << 20])
    });
}
