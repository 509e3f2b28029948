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
}
