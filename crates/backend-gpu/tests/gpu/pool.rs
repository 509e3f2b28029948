//! The device pool: a buffer is not handed out again before the GPU work that used it
//! has completed, and trimming frees every idle buffer.

use tempra_backend_gpu::{GpuOptions, GpuStorage};
use tempra_tensor::{Backend, DType, Storage, Tensor};

use crate::common::backend_with;

fn gpu_storage(t: &Tensor) -> &GpuStorage {
    match t.storage() {
        Storage::Device(d) => d
            .as_any()
            .downcast_ref::<GpuStorage>()
            .expect("a GPU tensor"),
        _ => panic!("not a device tensor"),
    }
}

#[test]
fn a_buffer_is_not_reused_before_its_work_completes() -> anyhow::Result<()> {
    // Its own backend: the pool counters below must not see other tests' traffic.
    let Some(gpu) = backend_with(&GpuOptions::from_env(), "pool reuse") else {
        return Ok(());
    };
    let ctx = gpu.exec_context();
    let n = 4096;
    let first: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let second: Vec<f32> = (0..n).map(|i| -7.0 - i as f32).collect();
    let a = ctx.from_slice(&first, &[n])?;
    let y = ctx.neg(&a)?; // recorded, not yet submitted: it will read a's buffer
    let a_buffer = gpu_storage(&a).block().buffer().clone();
    let before = gpu.pool_stats();
    drop(a); // a's buffer goes back to the pool while the neg still has to read it

    // A buffer of the same size class, written directly through the queue (as any
    // upload into a fresh lease may be): wgpu runs such writes before the recorded
    // work. Had the pool handed out a's buffer, the neg would read `second`.
    let b = gpu.allocate(n * 4)?;
    let Storage::Device(d) = &b else {
        panic!("device storage")
    };
    let b_block = d
        .as_any()
        .downcast_ref::<GpuStorage>()
        .expect("gpu")
        .block();
    anyhow::ensure!(
        *b_block.buffer() != a_buffer,
        "the pool handed out a busy buffer"
    );
    gpu.queue()
        .write_buffer(b_block.buffer(), 0, bytemuck::cast_slice(&second));
    let after = gpu.pool_stats();
    anyhow::ensure!(
        after.misses == before.misses + 1 && after.hits == before.hits,
        "{before:?} -> {after:?}"
    );

    let expected: Vec<f32> = first.iter().map(|v| -v).collect();
    anyhow::ensure!(y.to_vec_f32()? == expected, "the neg read stale data");

    // Once the work has completed, the buffer is ready again and reused (a hit).
    gpu.synchronize()?;
    let c = ctx.zeros(&[n], DType::F32)?;
    let reused = gpu.pool_stats();
    anyhow::ensure!(reused.hits == after.hits + 1, "{after:?} -> {reused:?}");
    anyhow::ensure!(
        *gpu_storage(&c).block().buffer() == a_buffer,
        "the idle buffer is reused"
    );
    drop((b, c, y));
    Ok(())
}

#[test]
fn live_buffers_return_to_their_count_after_trim() -> anyhow::Result<()> {
    let Some(gpu) = backend_with(&GpuOptions::from_env(), "pool trim") else {
        return Ok(());
    };
    let ctx = gpu.exec_context();
    gpu.trim()?;
    let baseline = gpu.live_buffers();
    {
        let x = ctx.randn(&[33, 65], DType::F32, 0.0, 1.0, 1)?;
        let w = ctx.randn(&[65, 17], DType::F32, 0.0, 1.0, 2)?;
        let y = ctx.matmul(&x, &w)?;
        let z = ctx.softmax(&ctx.exp(&y)?)?;
        let total = ctx.sum_all(&z)?;
        anyhow::ensure!((total.to_vec_f32()?[0] - 33.0).abs() < 1e-3);
        let weight =
            gpu.upload(&tempra_tensor::ExecContext::reference().zeros(&[4, 4], DType::F32)?)?;
        anyhow::ensure!(gpu.live_buffers() > baseline);
        drop(weight);
    }
    anyhow::ensure!(gpu.pool().outstanding() == 0, "leases still live");
    let cached = gpu.pool_stats().cached_blocks;
    anyhow::ensure!(cached > 0, "released buffers are cached");
    let freed = gpu.trim()?;
    anyhow::ensure!(freed > 0);
    anyhow::ensure!(
        gpu.live_buffers() == baseline,
        "live buffers {} after trim, {baseline} before",
        gpu.live_buffers()
    );
    anyhow::ensure!(gpu.pool().close().is_ok());
    Ok(())
}
