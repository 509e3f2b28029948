//! Device selection, errors, transfers and conversions.

use tempra_backend_gpu::{GpuBackend, GpuError, GpuOptions};
use tempra_tensor::{DType, Storage};

use crate::common::{assert_close, bytes_pair};
use crate::setup;

#[test]
fn a_missing_adapter_is_a_clear_error() {
    let options = GpuOptions {
        adapter: Some("no-such-adapter-tempra".into()),
        ..GpuOptions::default()
    };
    match GpuBackend::with_options(&options) {
        Err(GpuError::NoAdapter { reason }) => {
            assert!(reason.contains("no-such-adapter-tempra"), "{reason}");
        }
        Err(other) => panic!("expected NoAdapter, got {other}"),
        Ok(_) => panic!("an adapter matched a made-up name"),
    }
}

#[test]
fn adapter_summary_and_storage() -> anyhow::Result<()> {
    let (gpu, g, _r) = setup!("adapter_summary_and_storage");
    let summary = gpu.adapter();
    anyhow::ensure!(!summary.name.is_empty());
    eprintln!("adapter: {summary}, f16: {}", gpu.has_f16());
    let t = g.zeros(&[3, 4], DType::F32)?;
    anyhow::ensure!(matches!(t.storage(), Storage::Device(_)));
    anyhow::ensure!(t.storage().location() == "wgpu");
    anyhow::ensure!(gpu.owns(&t));
    Ok(())
}

#[test]
fn read_back_unaligned_ranges() -> anyhow::Result<()> {
    let (_gpu, g, _r) = setup!("read_back_unaligned_ranges");
    let bytes: Vec<u8> = (0..37u8).collect();
    let t = g.from_bytes(&bytes, &[37], DType::U8)?;
    for (offset, len) in [(0, 37), (1, 5), (3, 1), (13, 24), (36, 1)] {
        let mut dst = vec![0u8; len];
        t.storage().read_bytes(offset, &mut dst)?;
        anyhow::ensure!(dst == bytes[offset..offset + len], "read {offset}+{len}");
    }
    let mut dst = [0u8; 2];
    anyhow::ensure!(
        t.storage().read_bytes(36, &mut dst).is_err(),
        "read past the end"
    );
    // An odd-length f16 upload (6 bytes) and reading it back.
    let h = g.from_slice(&[half::f16::from_f32(1.5); 3], &[3])?;
    anyhow::ensure!(h.to_vec_f32()? == [1.5, 1.5, 1.5]);
    Ok(())
}

#[test]
fn upload_weight_converts_formats_without_a_shader() -> anyhow::Result<()> {
    let (gpu, g, r) = setup!("upload_weight_converts_formats_without_a_shader");
    let w = r.randn(&[3, 64], DType::F32, 0.0, 1.0, 200)?;
    let q = r.quantize(&w, DType::Q5_0)?;
    let up = gpu.upload_weight(&q)?;
    anyhow::ensure!(up.dtype() == DType::F16, "{}", up.dtype());
    assert_close(&up, &r.cast(&q, DType::F16)?, 0.0, "q5_0 -> f16")?;
    let q8 = r.quantize(&w, DType::Q8_0)?;
    let up = gpu.upload_weight(&q8)?;
    anyhow::ensure!(up.dtype() == DType::Q8_0);
    let (_, q8r) = bytes_pair(&g, &r, &q8)?;
    assert_close(&up, &q8r, 0.0, "q8_0 kept")?;
    Ok(())
}
