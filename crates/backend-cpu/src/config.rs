//! [`CpuConfig`]: how a [`crate::CpuBackend`] is set up.

use crate::isa::Isa;

/// The settings of [`crate::CpuBackend::with_config`]; `Default` gives the detected ISA
/// and the process-wide worker pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuConfig {
    /// The kernels' ISA (`None`: [`Isa::detect`]). Asking for one this CPU lacks is an
    /// error.
    pub isa: Option<Isa>,
    /// Threads in a dedicated worker pool, the caller included (`None`: share
    /// [`crate::WorkerPool::global`]).
    pub threads: Option<usize>,
    /// Let prefill (many rows per call) take faster arithmetic than decode's: block-
    /// quantized weights dequantized into the f32 GEMM instead of the integer products on
    /// quantized activations, and attention tiles blocked through the GEMM kernel. A row's
    /// result then depends on how many rows share its call, so a prompt run as one batch
    /// and the same tokens run one at a time give logits that differ in the last bits
    /// (and near-ties may flip). Default `false`: every kernel is row-invariant.
    pub fast_prefill: bool,
}
