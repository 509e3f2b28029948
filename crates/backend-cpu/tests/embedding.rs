//! embedding lookup for float and block tables against the reference (exact), and the
//! out-of-range error.

mod common;

use common::{check, cpus, randn, reference};
use tempra_tensor::{DType, ExecContext, Result, Tensor, quant};

fn ids(ctx: &ExecContext, v: usize, n: usize) -> Result<Tensor> {
    let ids: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 5) % v as u32).collect();
    ctx.from_slice(&ids, &[n])
}

#[test]
fn float_tables() {
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for (v, d, n) in [(1, 1, 1), (17, 33, 9), (50, 257, 40), (1000, 64, 300)] {
            check(&format!("{dtype} table [{v}, {d}] x{n}"), 0.0, |ctx| {
                ctx.embedding(&randn(ctx, &[v, d], dtype, 1), &ids(ctx, v, n)?)
            });
        }
        check(&format!("{dtype} transposed table, 2-d ids"), 0.0, |ctx| {
            let table = randn(ctx, &[33, 17], dtype, 2).t()?; // [17, 33], column-strided
            ctx.embedding(&table, &ids(ctx, 17, 12)?.reshape(&[3, 4])?)
        });
        check(&format!("{dtype} strided ids"), 0.0, |ctx| {
            let ids = ids(ctx, 17, 24)?
                .reshape(&[12, 2])?
                .narrow(1, 1, 1)?
                .squeeze(1)?;
            ctx.embedding(&randn(ctx, &[17, 40], dtype, 3), &ids)
        });
    }
}

#[test]
fn block_tables_dequantize_rows() {
    for dtype in [
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q2K,
        DType::Q3K,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ] {
        let (v, d) = (11, 2 * dtype.block_len());
        let values: Vec<f32> = (0..v * d)
            .map(|i| ((i as f32) * 0.731).sin() * 1.5)
            .collect();
        let mut bytes = vec![0u8; dtype.bytes_for(v * d).unwrap()];
        quant::quantize_row(dtype, &values, &mut bytes).unwrap();
        check(&format!("{dtype} table"), 0.0, |ctx| {
            ctx.embedding(&ctx.from_bytes(&bytes, &[v, d], dtype)?, &ids(ctx, v, 20)?)
        });
        check(&format!("{dtype} narrowed table"), 0.0, |ctx| {
            ctx.embedding(
                &ctx.from_bytes(&bytes, &[v, d], dtype)?.narrow(0, 2, 7)?,
                &ids(ctx, 7, 9)?,
            )
        });
    }
}

#[test]
fn out_of_range_ids_are_errors() {
    let want = {
        let ctx = reference();
        ctx.embedding(
            &randn(&ctx, &[4, 8], DType::F32, 1),
            &ctx.from_slice(&[1u32, 4, 2], &[3]).unwrap(),
        )
        .unwrap_err()
    };
    for cpu in cpus() {
        let ctx = &cpu.ctx;
        let err = ctx
            .embedding(
                &randn(ctx, &[4, 8], DType::F32, 1),
                &ctx.from_slice(&[1u32, 4, 2], &[3]).unwrap(),
            )
            .unwrap_err();
        assert_eq!(err, want, "[{}]", cpu.name);
        assert!(err.to_string().contains("id 4 at position 1"), "{err}");
    }
}
