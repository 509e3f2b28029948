//! `prepare_weight` over float weights: an F32, F16 or BF16 matrix in a mapping (as a
//! model file's tensors are) is copied as it is into owned memory, bit for bit, and
//! `linear` gives the same bits through the copy at one row and at many, on every ISA
//! this CPU runs. Weights already in memory and strided views are kept.

use std::sync::Arc;

use tempra_backend_cpu::{CpuBackend, CpuConfig, Isa};
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, Layout, MappedBytes, Result, Storage, Tensor};

/// `t`'s bytes behind a mapping of a buffer of their own.
fn mapped(t: &Tensor) -> Result<Tensor> {
    let bytes = t.storage().host_bytes()?[..t.layout().bytes_spanned()].to_vec();
    let len = bytes.len();
    let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(bytes);
    let storage = Storage::Mapped(MappedBytes::new(owner, 0, len)?);
    Tensor::from_storage(storage, Layout::contiguous(*t.shape(), t.dtype())?)
}

fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_vec_f32()?.into_iter().map(f32::to_bits).collect())
}

#[test]
fn float_weights_in_a_mapping_are_copied_bit_for_bit() -> Result<()> {
    for isa in Isa::available() {
        let config = CpuConfig {
            isa: Some(isa),
            threads: Some(2),
            fast_prefill: false,
        };
        let ctx = ExecContext::new(Arc::new(CpuBackend::with_config(HostPool::host(), config)?));
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            // 37 rows: the copy needs no group of rows.
            let w = ctx.cast(&ctx.randn(&[37, 96], DType::F32, 0.0, 1.0, 3)?, dtype)?;
            let file = mapped(&w)?;
            let copy = ctx
                .prepare_weight(&file)?
                .unwrap_or_else(|| panic!("{isa} {dtype}: a mapped matrix was not copied"));
            assert_eq!(
                (copy.dtype(), copy.dims()),
                (dtype, file.dims()),
                "{isa} {dtype}"
            );
            assert!(
                matches!(copy.storage(), Storage::Owned(_)),
                "{isa} {dtype}: the copy is not in owned memory"
            );
            assert_eq!(
                copy.storage().host_bytes()?[..copy.layout().bytes_spanned()],
                file.storage().host_bytes()?[..file.layout().bytes_spanned()],
                "{isa} {dtype}: the copy's bytes"
            );
            for rows in [1, 9] {
                let x = ctx.randn(&[rows, 96], DType::F32, 0.0, 1.0, 4)?;
                assert_eq!(
                    bits(&ctx.linear(&x, &copy, None)?)?,
                    bits(&ctx.linear(&x, &file, None)?)?,
                    "{isa} {dtype}, {rows} rows: linear through the copy"
                );
            }
            // In memory already (a pool lease), or strided: kept.
            assert!(
                ctx.prepare_weight(&w)?.is_none(),
                "{isa} {dtype}: in memory"
            );
            let view = file.narrow(1, 0, 48)?;
            assert!(
                ctx.prepare_weight(&view)?.is_none(),
                "{isa} {dtype}: a view"
            );
        }
    }
    Ok(())
}
