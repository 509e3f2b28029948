//! Persistent allocations through the seam (`allocate_persistent`: KV caches, step
//! arenas) are zeroed device buffers outside the pool, freed with their last view; and
//! the output rule on device storage: an `*_into` output may be a region of a buffer
//! other views share, but never the buffer of one of its inputs (wgpu refuses a buffer
//! bound for reading and writing in one dispatch, even in disjoint ranges).

use tempra_tensor::{DType, Storage, TensorError, UnaryOp};

#[test]
fn persistent_buffers_are_zeroed_device_memory_outside_the_pool() -> anyhow::Result<()> {
    let (gpu, g, _r) = crate::setup_own!("persistent_buffers_are_zeroed_device_memory");
    gpu.trim()?;
    let live = gpu.live_buffers();
    let pool_before = gpu.pool().stats();
    let t = g.zeros_persistent(&[64, 33], DType::F32)?;
    anyhow::ensure!(matches!(t.storage(), Storage::Device(_)), "device storage");
    anyhow::ensure!(gpu.live_buffers() == live + 1);
    let after = gpu.pool().stats();
    anyhow::ensure!(after.misses == pool_before.misses && after.outstanding == 0);
    anyhow::ensure!(t.to_vec_f32()?.iter().all(|&v| v == 0.0));
    drop(t);
    gpu.trim()?; // frees the read-back's staging buffer
    anyhow::ensure!(gpu.live_buffers() == live, "the buffer was not freed");
    Ok(())
}

#[test]
fn device_outputs_may_share_a_buffer_but_not_with_an_input() -> anyhow::Result<()> {
    let (_gpu, g, _r) = crate::setup!("device_outputs_may_share_a_buffer");
    let input = g.rand(&[2, 8], DType::F32, -1.0, 1.0, 3)?;
    // Rows 2..4 of a buffer other views share (the arena's case): fine.
    let whole = g.zeros_persistent(&[6, 8], DType::F32)?;
    let mut region = whole.narrow(0, 2, 2)?;
    g.unary_into(UnaryOp::Neg, &input, &mut region)?;
    let expected: Vec<f32> = input.to_vec_f32()?.iter().map(|v| -v).collect();
    anyhow::ensure!(region.to_vec_f32()? == expected);
    let rows = whole.to_vec_f32()?;
    anyhow::ensure!(rows[..16].iter().chain(&rows[32..]).all(|&v| v == 0.0));
    // Rows of the input's own buffer, disjoint or not: refused, nothing written.
    let before = input.to_vec_f32()?;
    let shared = g.rand(&[6, 8], DType::F32, -1.0, 1.0, 4)?;
    let source = shared.narrow(0, 0, 2)?;
    for start in [1, 2] {
        let mut out = shared.narrow(0, start, 2)?;
        let err = g.unary_into(UnaryOp::Neg, &source, &mut out).unwrap_err();
        anyhow::ensure!(
            matches!(&err, TensorError::Argument { op: "neg", .. })
                && err.to_string().contains("shares its buffer with input 0"),
            "{err}"
        );
    }
    anyhow::ensure!(input.to_vec_f32()? == before);
    Ok(())
}
