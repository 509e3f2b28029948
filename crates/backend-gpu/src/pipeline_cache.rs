//! The pipeline cache: each kernel's shader is compiled once per device, on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::block_on::block_on;
use crate::error::{GpuError, Result};

/// How a kernel accesses one storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
}

/// A compute kernel: its WGSL, entry point and storage bindings. Binding 0 is always the
/// uniform parameter block; storage bindings follow from 1 in `bindings` order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelSpec {
    /// A unique name of the shader source (with its variant).
    pub(crate) name: &'static str,
    /// The entry point.
    pub(crate) entry: &'static str,
    /// The storage bindings, from `@binding(1)` on.
    pub(crate) bindings: &'static [Access],
    /// Builds the WGSL source (`f16`: whether `enable f16;` and f16 dequantization apply).
    pub(crate) source: fn(bool) -> String,
    /// Whether this kernel uses f16 arithmetic (only when the device has SHADER_F16).
    pub(crate) f16: bool,
}

/// A compiled kernel.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

/// A pipeline's key: kernel name, entry point, f16 variant.
type PipelineKey = (&'static str, &'static str, bool);

/// Compiled pipelines keyed by kernel name and entry point.
#[derive(Debug, Default)]
pub(crate) struct PipelineCache {
    pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl PipelineCache {
    /// The pipeline for `spec`, compiling it on first use.
    pub(crate) fn get(&self, device: &wgpu::Device, spec: &KernelSpec) -> Result<Arc<Pipeline>> {
        let key = (spec.name, spec.entry, spec.f16);
        let mut map = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(&key) {
            return Ok(Arc::clone(p));
        }
        // Compiled under the lock: two threads never compile the same kernel twice.
        let pipeline = Arc::new(compile(device, spec)?);
        map.insert(key, Arc::clone(&pipeline));
        Ok(pipeline)
    }

    /// Compiled pipelines.
    pub(crate) fn len(&self) -> usize {
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

fn compile(device: &wgpu::Device, spec: &KernelSpec) -> Result<Pipeline> {
    let source = (spec.source)(spec.f16);
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(spec.name),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let mut entries = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }];
    for (i, access) in spec.bindings.iter().enumerate() {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: *access == Access::Read,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(spec.name),
        entries: &entries,
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(spec.name),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(spec.name),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(spec.entry),
        compilation_options: wgpu::PipelineCompilationOptions::default(),
        cache: None,
    });
    if let Some(err) = block_on(scope.pop()) {
        return Err(GpuError::Shader {
            kernel: format!("{}::{}", spec.name, spec.entry),
            message: err.to_string(),
        });
    }
    Ok(Pipeline { pipeline, layout })
}
