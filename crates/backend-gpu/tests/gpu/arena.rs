//! `BufferArena`: buffers as the spec table says, outside the pool, zeroing by role and
//! rows, and a release (explicit or on drop) that returns the device's live buffers to
//! their earlier count.

use tempra_backend_gpu::{ArenaCapacity, ArenaShape, BufferArena, GpuError, GpuOptions};
use tempra_tensor::{Backend, DType, Tensor};

use crate::setup_own;

fn toy() -> (ArenaShape, ArenaCapacity) {
    (
        ArenaShape {
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            key_dim: 16,
            value_dim: 8,
            ffn: 172,
            vocab: 320,
            layers: 3,
            kv_dtype: DType::F16,
        },
        ArenaCapacity {
            max_batch_tokens: 8,
            max_logit_rows: 4,
            max_seq_len: 32,
        },
    )
}

#[test]
fn arena_allocates_the_spec_table_and_release_frees_it() -> anyhow::Result<()> {
    let (gpu, _g, _r) = setup_own!("arena_allocates_the_spec_table_and_release_frees_it");
    let (shape, capacity) = toy();
    let specs = shape.buffer_specs(&capacity);
    let before = gpu.live_buffers();
    let pool_before = gpu.pool().stats();
    let mut arena = BufferArena::new(&gpu, "toy", &shape, capacity)?;
    anyhow::ensure!(gpu.live_buffers() == before + specs.len());
    anyhow::ensure!(arena.buffer_count() == specs.len() && specs.len() == 17 + 2 * 3);
    anyhow::ensure!(arena.bytes() == shape.arena_bytes(&capacity));
    // Outside the pool: nothing leased from it.
    anyhow::ensure!(gpu.pool().stats().outstanding_bytes == pool_before.outstanding_bytes);
    let mut seen = Vec::new();
    arena.buffers()?.for_each(|name, layer, t| {
        seen.push((name, layer, t.dims().to_vec(), t.dtype(), gpu.owns(t)));
    });
    let want: Vec<_> = specs
        .iter()
        .map(|s| (s.name, s.layer, s.dims.clone(), s.dtype, true))
        .collect();
    anyhow::ensure!(seen == want, "{seen:?}\nvs\n{want:?}");

    let report = arena.release();
    anyhow::ensure!(report.label == "toy" && report.still_viewed == 0);
    anyhow::ensure!(report.buffers == specs.len());
    anyhow::ensure!(report.bytes >= shape.arena_bytes(&capacity));
    anyhow::ensure!(
        gpu.live_buffers() == before,
        "{} live buffers after release, {before} before",
        gpu.live_buffers()
    );
    anyhow::ensure!(
        report
            .to_string()
            .starts_with("arena `toy`: released 23 buffers")
    );
    // Idempotent, and the arena says it is gone.
    let again = arena.release();
    anyhow::ensure!(again.buffers == 0 && again.bytes == 0);
    anyhow::ensure!(arena.is_released() && arena.bytes() == 0);
    anyhow::ensure!(arena.buffers().is_err());
    anyhow::ensure!(arena.zero_all().is_err());
    drop(arena);
    anyhow::ensure!(gpu.live_buffers() == before);
    Ok(())
}

#[test]
fn dropping_an_arena_releases_it_and_views_outlive_it() -> anyhow::Result<()> {
    let (gpu, _g, _r) = setup_own!("dropping_an_arena_releases_it_and_views_outlive_it");
    let (shape, capacity) = toy();
    let before = gpu.live_buffers();
    drop(BufferArena::new(&gpu, "dropped", &shape, capacity)?);
    anyhow::ensure!(gpu.live_buffers() == before);

    let mut arena = BufferArena::new(&gpu, "viewed", &shape, capacity)?;
    let view = arena.buffers()?.hidden.narrow(0, 0, 2)?;
    let report = arena.release();
    anyhow::ensure!(report.still_viewed == 1, "{report}");
    anyhow::ensure!(gpu.live_buffers() == before + 1);
    anyhow::ensure!(view.to_vec_f32()? == vec![0.0; 2 * 64]);
    drop(view);
    gpu.trim()?; // the read-back's staging buffer
    anyhow::ensure!(gpu.live_buffers() == before);
    Ok(())
}

/// Fills every buffer with `value` through the backend's fill kernel.
fn fill_all(gpu: &tempra_backend_gpu::GpuBackend, arena: &BufferArena, value: f64) {
    arena.buffers().unwrap().for_each(|name, _, t| {
        let mut t = t.clone();
        Backend::fill(gpu, &mut t, value).unwrap_or_else(|e| panic!("fill {name}: {e}"));
    });
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_f32().unwrap()
}

#[test]
fn zeroing_touches_only_what_it_says() -> anyhow::Result<()> {
    let (gpu, _g, _r) = setup_own!("zeroing_touches_only_what_it_says");
    let (shape, capacity) = toy();
    let arena = BufferArena::new(&gpu, "zeroing", &shape, capacity)?;
    let b = arena.buffers()?;
    fill_all(&gpu, &arena, 7.0);

    // The first 3 rows of the token-major buffers (3 of the 4 logit rows).
    arena.zero_all_rows(3)?;
    let hidden = values(&b.hidden);
    anyhow::ensure!(hidden[..3 * 64].iter().all(|&x| x == 0.0));
    anyhow::ensure!(hidden[3 * 64..].iter().all(|&x| x == 7.0));
    let ffn = values(&b.ffn_act);
    anyhow::ensure!(ffn[..3 * 172].iter().all(|&x| x == 0.0));
    anyhow::ensure!(ffn[3 * 172..].iter().all(|&x| x == 7.0));
    let ids = b.token_ids.to_vec::<u32>()?;
    anyhow::ensure!(ids[..3] == [0, 0, 0] && ids[3..].iter().all(|&x| x == 7));
    let logits = values(&b.logits);
    anyhow::ensure!(logits[..3 * 320].iter().all(|&x| x == 0.0));
    anyhow::ensure!(logits[3 * 320..].iter().all(|&x| x == 7.0));
    anyhow::ensure!(values(&b.keys[2]).iter().all(|&x| x == 7.0));
    // More rows than the arena holds is an error; all of them is fine (logits clamp).
    anyhow::ensure!(arena.zero_all_rows(9).is_err());
    arena.zero_all_rows(8)?;
    anyhow::ensure!(values(&b.logits).iter().all(|&x| x == 0.0));

    // The KV cache only.
    fill_all(&gpu, &arena, 5.0);
    arena.zero_prefill_essentials()?;
    for l in 0..shape.layers {
        anyhow::ensure!(values(&b.keys[l]).iter().all(|&x| x == 0.0));
        anyhow::ensure!(values(&b.values[l]).iter().all(|&x| x == 0.0));
    }
    anyhow::ensure!(values(&b.q).iter().all(|&x| x == 5.0));

    // Everything.
    fill_all(&gpu, &arena, 3.0);
    arena.zero_all()?;
    let mut nonzero = Vec::new();
    b.for_each(|name, layer, t| {
        if values(t).iter().any(|&x| x != 0.0) {
            nonzero.push((name, layer));
        }
    });
    anyhow::ensure!(nonzero.is_empty(), "not zeroed: {nonzero:?}");
    Ok(())
}

#[test]
fn bad_shapes_and_oversized_buffers_are_errors() -> anyhow::Result<()> {
    let (gpu, _g, _r) = setup_own!("bad_shapes_and_oversized_buffers_are_errors");
    let (shape, capacity) = toy();
    let before = gpu.live_buffers();
    let bad = ArenaShape { heads: 5, ..shape };
    let err = BufferArena::new(&gpu, "bad", &bad, capacity).unwrap_err();
    anyhow::ensure!(err.to_string().contains("multiple of 2 KV heads"), "{err}");

    // A binding limit below the logits buffer (4 · 320 · 4 bytes).
    let options = GpuOptions {
        max_binding_bytes: Some(4096),
        ..GpuOptions::from_env()
    };
    let small = tempra_backend_gpu::GpuBackend::with_options(&options)?;
    let small_before = small.live_buffers();
    match BufferArena::new(&small, "too big", &shape, capacity) {
        Err(GpuError::TooLarge { what, .. }) => anyhow::ensure!(what == "ffn_gate", "{what}"),
        other => anyhow::bail!("expected TooLarge, got {other:?}"),
    }
    // Nothing allocated before the failure stays alive.
    anyhow::ensure!(small.live_buffers() == small_before);
    anyhow::ensure!(gpu.live_buffers() == before);
    Ok(())
}
