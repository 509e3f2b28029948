//! What the product ops (`matmul`, `linear`) need from the backend: the kernel choice,
//! the scratch pool and the worker pool, gathered per call.

use crate::backend::CpuBackend;
use crate::gemm::{self, Gemm};
use crate::parallel::ScopedThreads;

/// The worker pool the products run on.
static THREADS: std::sync::OnceLock<ScopedThreads> = std::sync::OnceLock::new();

impl CpuBackend {
    /// The GEMM settings for one product call.
    pub(crate) fn products(&self) -> Gemm<'_> {
        let par = THREADS.get_or_init(|| ScopedThreads {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        });
        Gemm { kernel: gemm::best_kernel(), pool: self.pool(), par }
    }
}
