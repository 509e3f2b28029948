//! Adapter selection and device creation: only the features and limits the kernels use.

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::block_on::block_on;
use crate::error::{GpuError, Result};
use crate::options::GpuOptions;

/// What the kernels need beyond wgpu's downlevel defaults: nothing. Every kernel binds at
/// most four storage buffers plus one uniform, runs at most 256 invocations per workgroup
/// and uses under 16 KiB of workgroup memory, so the downlevel limits are requested, with
/// the adapter's own buffer-size limits (weights are large) and alignments.
fn required_limits(adapter: &wgpu::Limits) -> wgpu::Limits {
    let mut limits = wgpu::Limits::downlevel_defaults().using_alignment(adapter.clone());
    limits.max_buffer_size = adapter.max_buffer_size;
    limits.max_storage_buffer_binding_size = adapter.max_storage_buffer_binding_size;
    limits
}

/// A description of the adapter a backend runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// The adapter's name (e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The graphics API (`Vulkan`, `Metal`, `Dx12`).
    pub backend: String,
    /// Discrete, integrated, virtual or CPU.
    pub device_type: String,
    /// The driver's name and version, when the driver reports them.
    pub driver: String,
}

impl AdapterSummary {
    fn of(info: &wgpu::AdapterInfo) -> Self {
        Self {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
        }
    }
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {})", self.name, self.backend, self.device_type)?;
        if !self.driver.is_empty() {
            write!(f, " [{}]", self.driver)?;
        }
        Ok(())
    }
}

/// The first uncaptured device error, kept until an operation reports it.
#[derive(Debug, Default, Clone)]
pub(crate) struct ErrorSink(Arc<Mutex<Option<String>>>);

impl ErrorSink {
    fn record(&self, message: String) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(message);
    }

    /// The recorded error, as `op`'s failure (taken: reported once).
    pub(crate) fn check(&self, op: &'static str) -> Result<()> {
        let taken = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        match taken {
            Some(message) => Err(GpuError::Device { op, message }),
            None => Ok(()),
        }
    }
}

/// An opened device: the adapter's description, the device, its queue and what was
/// enabled.
pub(crate) struct OpenedDevice {
    pub(crate) summary: AdapterSummary,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) f16: bool,
    pub(crate) errors: ErrorSink,
}

/// The instance backends to search.
fn instance(options: &GpuOptions) -> (wgpu::Instance, wgpu::Backends) {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    let mut desc = desc.with_env(); // WGPU_BACKEND, WGPU_VALIDATION, ...
    if let Some(backends) = options.backends {
        desc.backends = backends;
    }
    let backends = desc.backends;
    (wgpu::Instance::new(desc), backends)
}

/// Orders adapters: discrete first, CPU (software) last.
fn preference(info: &wgpu::AdapterInfo) -> u8 {
    match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// The adapters wgpu sees with these options (for messages and `--list` style output).
pub fn list_adapters(options: &GpuOptions) -> Vec<AdapterSummary> {
    let (instance, backends) = instance(options);
    block_on(instance.enumerate_adapters(backends))
        .iter()
        .map(|a| AdapterSummary::of(&a.get_info()))
        .collect()
}

/// Picks an adapter and opens a device on it.
pub(crate) fn open(options: &GpuOptions) -> Result<OpenedDevice> {
    let (instance, backends) = instance(options);
    let mut adapters = block_on(instance.enumerate_adapters(backends));
    adapters.retain(|a| a.get_info().backend != wgpu::Backend::Noop);
    let seen: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
    if let Some(wanted) = &options.adapter {
        let wanted_lower = wanted.to_lowercase();
        adapters.retain(|a| a.get_info().name.to_lowercase().contains(&wanted_lower));
        if adapters.is_empty() {
            return Err(GpuError::NoAdapter {
                reason: format!(
                    "no adapter name contains {wanted:?} (searched {backends:?}; seen: {})",
                    if seen.is_empty() {
                        "none".to_string()
                    } else {
                        seen.join(", ")
                    }
                ),
            });
        }
    }
    adapters.sort_by_key(|a| preference(&a.get_info()));
    let adapter = adapters
        .into_iter()
        .next()
        .ok_or_else(|| GpuError::NoAdapter {
            reason: format!(
                "wgpu found no adapter for {backends:?} (is a Vulkan, Metal or DX12 driver \
             installed? on Linux without a GPU: Mesa's lavapipe, Debian package \
             mesa-vulkan-drivers)"
            ),
        })?;
    let info = adapter.get_info();
    let summary = AdapterSummary::of(&info);
    let adapter_limits = adapter.limits();
    let limits = required_limits(&adapter_limits);
    if !limits.check_limits(&adapter_limits) {
        return Err(GpuError::UnsuitableAdapter {
            adapter: summary.name,
            reason: "below wgpu's downlevel compute limits".into(),
        });
    }
    // Only what the kernels use: never the adapter's feature list wholesale (drivers list
    // experimental features that make request_device fail).
    let f16 = options.use_f16 && adapter.features().contains(wgpu::Features::SHADER_F16);
    let required_features = if f16 {
        wgpu::Features::SHADER_F16
    } else {
        wgpu::Features::empty()
    };
    let desc = wgpu::DeviceDescriptor {
        label: Some("tempra"),
        required_features,
        required_limits: limits,
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    };
    let (device, queue) =
        block_on(adapter.request_device(&desc)).map_err(|e| GpuError::RequestDevice {
            adapter: summary.name.clone(),
            message: e.to_string(),
        })?;
    let errors = ErrorSink::default();
    let sink = errors.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| sink.record(e.to_string())));
    Ok(OpenedDevice {
        summary,
        device,
        queue,
        f16,
        errors,
    })
}
