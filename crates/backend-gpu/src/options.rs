//! `GpuOptions`: how the backend picks its adapter and sizes its device pool.

use tempra_pool::PoolConfig;

/// The environment variable naming the adapter to use: any adapter whose name contains
/// its value (case-insensitive) is accepted, e.g. `TEMPRA_GPU_ADAPTER=llvmpipe`.
pub const ADAPTER_ENV: &str = "TEMPRA_GPU_ADAPTER";

/// How [`crate::GpuBackend::with_options`] selects and configures the device.
///
/// ```
/// use tempra_backend_gpu::GpuOptions;
///
/// let mut options = GpuOptions::from_env(); // honours TEMPRA_GPU_ADAPTER and WGPU_BACKEND
/// options.adapter = Some("nvidia".into()); // an explicit choice overrides the environment
/// assert!(options.use_f16);
/// ```
#[derive(Debug, Clone)]
pub struct GpuOptions {
    /// Use only an adapter whose name contains this (case-insensitive). `None` picks the
    /// best available: discrete, then integrated, then virtual, then CPU (software) GPUs.
    pub adapter: Option<String>,
    /// The wgpu backends to search. `None`: Vulkan, Metal and DX12, narrowed by the
    /// `WGPU_BACKEND` environment variable when set (e.g. `WGPU_BACKEND=vulkan`).
    pub backends: Option<wgpu::Backends>,
    /// Request `SHADER_F16` when the adapter offers it, and dequantize weights in f16
    /// arithmetic inside `linear` (accumulation stays f32).
    pub use_f16: bool,
    /// The device pool's settings (its cache budget).
    pub pool: PoolConfig,
    /// Caps the size of one storage binding below the device's
    /// `max_storage_buffer_binding_size` (tests use it to exercise windowed bindings on
    /// small tensors). `None`: the device's limit.
    pub max_binding_bytes: Option<u64>,
    /// Caps workgroups per dispatch dimension below the device's 65535 (tests use it to
    /// exercise 2-D dispatch on small tensors). `None`: the device's limit.
    pub max_workgroups_per_dim: Option<u32>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        Self {
            adapter: None,
            backends: None,
            use_f16: true,
            pool: PoolConfig::default(),
            max_binding_bytes: None,
            max_workgroups_per_dim: None,
        }
    }
}

impl GpuOptions {
    /// The defaults, with [`Self::adapter`] taken from `TEMPRA_GPU_ADAPTER` when set and
    /// not empty.
    pub fn from_env() -> Self {
        let adapter = std::env::var(ADAPTER_ENV)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Self {
            adapter,
            ..Self::default()
        }
    }
}
