//! Snapshots of how tensors print.

use tempra_tensor::{DType, ExecContext};

#[test]
fn tensor_display_and_debug() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let small = ctx.arange(0.0, 6.0, 1.0, DType::F32)?.reshape(&[2, 3])?;
    let ids = ctx.from_slice(&[3u32, 1, 4], &[3])?;
    let long = ctx.arange(0.0, 20.0, 1.0, DType::F64)?;
    let cube = ctx
        .arange(0.0, 24.0, 1.0, DType::F32)?
        .reshape(&[2, 3, 4])?
        .transpose(1, 2)?;
    let scalar = ctx.full(&[], DType::F32, 2.5)?;
    let quant = ctx.quantize(&ctx.full(&[1, 32], DType::F32, 1.0)?, DType::Q8_0)?;
    let shown = format!(
        "{small}\n\n{ids}\n\n{long}\n\n{cube}\n\n{scalar}\n\n{quant:?}\n\n{:?}",
        small.narrow(1, 1, 2)?
    );
    insta::assert_snapshot!(shown);
    Ok(())
}
