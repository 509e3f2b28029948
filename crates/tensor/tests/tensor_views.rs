//! Views share storage, refcounts release blocks to the pool, views outlive parents, and
//! in-place updates happen only on unique storage.

use tempra_tensor::{DType, ExecContext, Storage, Tensor, TensorError};

fn storage_addr(t: &Tensor) -> *const u8 {
    match t.storage() {
        Storage::Pooled(lease) => lease.as_ptr(),
        other => panic!("expected pooled storage, got {other:?}"),
    }
}

#[test]
fn views_share_storage() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let a = ctx
        .arange(0.0, 24.0, 1.0, DType::F32)?
        .reshape(&[2, 3, 4])?;
    let views = [
        a.narrow(1, 1, 2)?,
        a.reshape(&[6, 4])?,
        a.transpose(0, 2)?,
        a.permute(&[2, 0, 1])?,
        a.unsqueeze(0)?,
        a.select(0, 1)?,
        a.narrow(0, 0, 1)?.squeeze(0)?,
        a.clone(),
        a.narrow(2, 0, 1)?.broadcast_to(&[2, 3, 5])?,
    ];
    for v in &views {
        assert!(v.same_storage(&a));
        assert_eq!(storage_addr(v), storage_addr(&a));
    }
    assert_eq!(a.storage_refs(), 1 + views.len());
    assert_eq!(
        views[0].to_vec_f32()?,
        [
            4., 5., 6., 7., 8., 9., 10., 11., 16., 17., 18., 19., 20., 21., 22., 23.
        ]
    );
    assert_eq!(views[2].dims(), [4, 3, 2]);
    assert_eq!(views[2].to_vec_f32()?[..4], [0., 12., 4., 16.]);
    assert_eq!(
        views[5].to_vec_f32()?,
        (12..24).map(|v| v as f32).collect::<Vec<_>>()
    );
    Ok(())
}

#[test]
fn last_view_returns_block_to_pool_and_views_outlive_parents() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let before = ctx.pool_stats().outstanding;
    let a = ctx.randn(&[64, 64], DType::F32, 0.0, 1.0, 1)?;
    assert_eq!(ctx.pool_stats().outstanding, before + 1);
    let expected = a.to_vec_f32()?[64..128].to_vec();
    let row = a.narrow(0, 1, 1)?;
    drop(a); // the view keeps the block alive
    assert_eq!(ctx.pool_stats().outstanding, before + 1);
    assert_eq!(row.to_vec_f32()?, expected);
    drop(row);
    let stats = ctx.pool_stats();
    assert_eq!(stats.outstanding, before);
    assert_eq!(stats.cached_blocks, 1, "the block went back to the pool");
    // And is handed out again for the next output of that size.
    let hits = stats.hits;
    let _b = ctx.zeros(&[64, 64], DType::F32)?;
    assert_eq!(ctx.pool_stats().hits, hits + 1);
    Ok(())
}

#[test]
fn inplace_only_on_unique_storage() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let one = ctx.full(&[4], DType::F32, 1.0)?;

    // Unique: the residual add reuses the buffer.
    let a = ctx.full(&[4], DType::F32, 2.0)?;
    let addr = storage_addr(&a);
    let sum = ctx.add_inplace(a, &one)?;
    assert_eq!(storage_addr(&sum), addr);
    assert_eq!(sum.to_vec_f32()?, [3.0; 4]);

    // Shared: a fresh output; the shared buffer is untouched.
    let view = sum.narrow(0, 0, 4)?;
    let sum2 = ctx.add_inplace(sum, &one)?;
    assert_ne!(storage_addr(&sum2), storage_addr(&view));
    assert_eq!(view.to_vec_f32()?, [3.0; 4]);
    assert_eq!(sum2.to_vec_f32()?, [4.0; 4]);

    // Broadcasting that would grow the left side: a fresh output too.
    let small = ctx.full(&[1], DType::F32, 1.0)?;
    let grown = ctx.add_inplace(small, &one)?;
    assert_eq!(grown.to_vec_f32()?, [2.0; 4]);
    Ok(())
}

#[test]
fn writes_need_unique_storage() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let mut cache = Tensor::owned_zeros(&[8, 2], DType::F32)?;
    let rows = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    ctx.write_slice(&mut cache, 0, 3, &rows)?;
    assert_eq!(cache.narrow(0, 3, 2)?.to_vec_f32()?, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(cache.narrow(0, 0, 3)?.to_vec_f32()?, [0.0; 6]);
    let reader = cache.narrow(0, 0, 5)?;
    let err = ctx.write_slice(&mut cache, 0, 5, &rows).unwrap_err();
    assert!(
        matches!(
            err,
            TensorError::Argument {
                op: "write_slice",
                ..
            }
        ),
        "{err}"
    );
    drop(reader);
    let err = ctx.write_slice(&mut cache, 0, 7, &rows).unwrap_err();
    assert!(
        matches!(
            err,
            TensorError::OutOfBounds {
                op: "write_slice",
                ..
            }
        ),
        "{err}"
    );
    assert!(cache.host_slice_mut::<f32>().is_ok());
    Ok(())
}

#[test]
fn bad_views_are_errors() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let a = ctx.zeros(&[2, 3], DType::F32)?;
    assert!(matches!(
        a.narrow(1, 2, 2),
        Err(TensorError::OutOfBounds { .. })
    ));
    assert!(matches!(
        a.narrow(2, 0, 1),
        Err(TensorError::DimOutOfRange { .. })
    ));
    assert!(matches!(
        a.reshape(&[4, 2]),
        Err(TensorError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        a.t()?.reshape(&[6]),
        Err(TensorError::View { .. })
    ));
    assert!(matches!(
        a.permute(&[0, 0]),
        Err(TensorError::View { .. } | TensorError::Argument { .. })
    ));
    assert!(matches!(a.squeeze(0), Err(TensorError::View { .. })));
    assert!(a.broadcast_to(&[3, 3]).is_err());
    let q = ctx.quantize(&ctx.zeros(&[2, 64], DType::F32)?, DType::Q8_0);
    if let Ok(q) = q {
        assert!(
            matches!(q.narrow(1, 16, 32), Err(TensorError::View { .. })),
            "narrow would split a block"
        );
        assert!(q.narrow(1, 32, 32).is_ok());
        assert!(q.t().is_err());
    }
    Ok(())
}

#[test]
fn mapped_and_static_storage_are_zero_copy() -> anyhow::Result<()> {
    use std::sync::Arc;
    use tempra_tensor::{Layout, MappedBytes, Shape};
    let values: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let owner: Arc<dyn AsRef<[u8]> + Send + Sync> =
        Arc::new(bytemuck::cast_slice::<f32, u8>(&values).to_vec());
    let mapped = MappedBytes::new(owner, 8, 16)?;
    let ptr = mapped.as_bytes().as_ptr();
    let t = Tensor::from_storage(
        Storage::Mapped(mapped),
        Layout::contiguous(Shape::new(&[4])?, DType::F32)?,
    )?;
    assert_eq!(t.storage().host_bytes()?.as_ptr(), ptr);
    assert_eq!(t.to_vec_f32()?, [2.0, 3.0, 4.0, 5.0]);
    let mut t2 = t.clone();
    drop(t);
    assert!(
        t2.host_slice_mut::<f32>().is_err(),
        "mapped storage is read-only"
    );
    assert!(MappedBytes::new(Arc::new(vec![0u8; 4]), 2, 4).is_err());
    Ok(())
}

#[test]
fn persistent_tensors_stay_out_of_the_pool() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let before = ctx.pool_stats();
    let z = ctx.zeros_persistent(&[16, 16], DType::F32)?;
    assert!(matches!(z.storage(), Storage::Owned(_)));
    assert_eq!(z.to_vec_f32()?, vec![0.0; 256]);
    let t = ctx
        .arange(0.0, 4.0, 1.0, DType::F32)?
        .reshape(&[2, 2])?
        .t()?;
    let p = ctx.persistent_copy(&t)?;
    drop(t);
    assert!(matches!(p.storage(), Storage::Owned(_)));
    assert_eq!(p.to_vec_f32()?, [0.0, 2.0, 1.0, 3.0]);
    let after = ctx.pool_stats();
    assert_eq!(
        after.outstanding, before.outstanding,
        "no pool lease is held by persistent tensors"
    );
    Ok(())
}
