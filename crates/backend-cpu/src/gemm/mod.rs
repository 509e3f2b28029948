//! f32 GEMM: `C = A · B` over strided F32/F16/BF16 operands, cache-blocked with packed
//! panels and a register-tiled micro-kernel per ISA (AVX2+FMA, portable).
//!
//! Loop nest (BLIS order), per task:
//!
//! ```text
//! for jc in 0..n step NC            // B block columns (L3)
//!   for pc in 0..k step KC          // depth block
//!     pack B[pc.., jc..] into NR-wide panels       (KC × NC)
//!     for ic in 0..m step MC
//!       pack A[ic.., pc..] into MR-tall panels     (MC × KC, stays in L2)
//!       for jr: for ir: micro-kernel on an MR × NR tile of C  (B panel stays in L1)
//! ```
//!
//! Packing reads each operand along its contiguous direction, so transposed views are
//! never copied whole, and converts F16/BF16 to f32 on the way. Threads split C into
//! column (or row) ranges; each task packs its own panels into one pool scratch lease
//! (`(MC + MR) · KC + (NC + NR) · KC` f32s, about 0.6 MiB with the AVX2 blocking).

mod dequant;
pub(crate) mod gemv;
mod kernel_avx2;
mod kernel_scalar;
pub(crate) mod operand;
mod pack;
#[cfg(test)]
mod probe;

use std::ops::Range;
use std::sync::Mutex;

use tempra_pool::HostPool;
use tempra_tensor::{Result, TensorError};

pub(crate) use operand::{MatRef, Values};
use pack::{KC_MAX, pack_panels};

use crate::parallel::Parallel;

/// A micro-kernel and the blocking that suits it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmKernel {
    /// Name for benchmarks and test messages.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    mr: usize,
    nr: usize,
    kc: usize,
    mc: usize,
    nc: usize,
    /// `C[MR×NR] (+)= A_panel · B_panel`; see the kernels' safety contracts.
    run: unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool),
}

/// The portable kernel: every target has it.
pub(crate) const SCALAR: GemmKernel = GemmKernel {
    name: "scalar",
    mr: kernel_scalar::MR,
    nr: kernel_scalar::NR,
    kc: 256,
    mc: 64,
    nc: 2048,
    run: kernel_scalar::kernel,
};

// Dequantize-while-packing reads whole blocks: every depth block must cover whole
// 256-value K-quant super-blocks (and so whole 32-value blocks).
const _: () = assert!(SCALAR.kc.is_multiple_of(256) && SCALAR.kc <= KC_MAX);
#[cfg(target_arch = "x86_64")]
const _: () = assert!(AVX2.kc.is_multiple_of(256) && AVX2.kc <= KC_MAX);

/// The AVX2+FMA kernel; only hand it out after runtime detection.
#[cfg(target_arch = "x86_64")]
const AVX2: GemmKernel = GemmKernel {
    name: "avx2",
    mr: kernel_avx2::MR,
    nr: kernel_avx2::NR,
    kc: 256,
    mc: 72,
    nc: 3072,
    // SAFETY (of later calls): `avx2_kernel` is only returned when AVX2 and FMA were
    // detected at run time.
    run: avx2_entry,
};

/// Calls the AVX2 kernel (a plain `unsafe fn` pointer for the table).
///
/// # Safety
///
/// As [`kernel_avx2::kernel`]: AVX2 and FMA present, panels and tile valid.
#[cfg(target_arch = "x86_64")]
unsafe fn avx2_entry(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    // SAFETY: forwarded contract.
    unsafe { kernel_avx2::kernel(kc, a, b, c, ldc, acc) }
}

/// The AVX2 kernel if this CPU has AVX2 and FMA.
pub(crate) fn avx2_kernel() -> Option<GemmKernel> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return Some(AVX2);
    }
    None
}

/// The fastest kernel this CPU runs.
#[cfg(test)]
pub(crate) fn best_kernel() -> GemmKernel {
    avx2_kernel().unwrap_or(SCALAR)
}

/// Work below this many multiply-adds stays on the calling thread.
const MIN_PARALLEL_MACS: usize = 1 << 18;

/// The narrowest share of the split output side (columns or rows) one task gets: a task
/// repacks the operand that is not split (≈ 0.3 ns per value against ≈ 1/32 ns per
/// multiply-add at peak), which costs about `10 / edge` of its time.
const MIN_TASK_EDGE: usize = 384;

/// The output matrix: `m × n` f32s at `ptr` with row stride `ldc`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutPtr {
    ptr: *mut f32,
    ldc: usize,
}

// SAFETY: an `OutPtr` is shared by the tasks of one product; each task writes only its
// own disjoint tile range of C (see `gemm`), and the product returns only after every task
// ended.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The output over `c`, a row-major matrix with row stride `ldc`.
    pub(crate) fn new(c: &mut [f32], ldc: usize) -> Self {
        Self {
            ptr: c.as_mut_ptr(),
            ldc,
        }
    }

    /// Row `i`, columns `cols`, as a mutable slice.
    ///
    /// # Safety
    ///
    /// The elements lie inside the matrix, and no one else accesses them while the slice
    /// lives.
    pub(crate) unsafe fn row_segment<'s>(self, i: usize, cols: Range<usize>) -> &'s mut [f32] {
        // SAFETY: in bounds and unaliased by the caller's contract.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(i * self.ldc + cols.start), cols.len())
        }
    }

    /// The view moved to element `(i, j)`.
    ///
    /// # Safety
    ///
    /// `(i, j)` lies inside the matrix this pointer was made for.
    pub(crate) unsafe fn at(self, i: usize, j: usize) -> Self {
        // SAFETY: in bounds by the caller's contract.
        let ptr = unsafe { self.ptr.add(i * self.ldc + j) };
        Self { ptr, ldc: self.ldc }
    }
}

/// One product's settings: kernel, scratch pool and worker pool.
#[derive(Clone, Copy)]
pub(crate) struct Gemm<'a> {
    pub(crate) kernel: GemmKernel,
    pub(crate) pool: &'a HostPool,
    pub(crate) par: &'a dyn Parallel,
}

impl Gemm<'_> {
    /// Packing scratch for one task: an `mc × kc` panel of A and a `kc × nc` panel of B,
    /// with `kc` no deeper than the product (a shallow product packs shallow panels).
    fn scratch_floats(&self, m: usize, n: usize, depth: usize) -> usize {
        let k = &self.kernel;
        let mc = m.min(k.mc).div_ceil(k.mr) * k.mr;
        let nc = n.min(k.nc).div_ceil(k.nr) * k.nr;
        (mc + nc) * depth.min(k.kc)
    }

    /// `C = A · B` for `A [m, k]`, `B [k, n]` into `c` (an `m × n` matrix with row stride
    /// `ldc` that no one else touches during the call), split over the worker pool.
    ///
    /// # Safety
    ///
    /// `c` addresses an `m × n` region with row stride `ldc` that is valid for writes and
    /// not accessed by anything else during the call.
    pub(crate) unsafe fn gemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: OutPtr,
    ) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let macs = m.saturating_mul(n).saturating_mul(k.max(1));
        if self.par.threads() <= 1 || macs < MIN_PARALLEL_MACS {
            // SAFETY: forwarded contract.
            return unsafe { self.task(m, n, k, a, b, c) };
        }
        let (mr, nr) = (self.kernel.mr, self.kernel.nr);
        let error = Mutex::new(None);
        // Split the larger output side into panel ranges.
        // Split the side that gives every thread a wide share; else the larger side.
        let threads = self.par.threads();
        let (cols_wide, rows_wide) = (n >= threads * MIN_TASK_EDGE, m >= threads * MIN_TASK_EDGE);
        let split_cols = if cols_wide != rows_wide {
            cols_wide
        } else {
            n >= m
        };
        let (items, per_item_macs) = if split_cols {
            (n.div_ceil(nr), m * k.max(1) * nr)
        } else {
            (m.div_ceil(mr), n * k.max(1) * mr)
        };
        // Each task packs the whole unsplit operand again: keep its share of the output
        // wide enough ([`MIN_TASK_EDGE`]) that this stays a few percent of the work.
        let edge_items = if cols_wide || rows_wide {
            MIN_TASK_EDGE.div_ceil(if split_cols { nr } else { mr })
        } else {
            1
        };
        let min_items = MIN_PARALLEL_MACS.div_ceil(per_item_macs).max(edge_items);
        self.par
            .parallel_for(items, min_items, &|range: Range<usize>| {
                let (rows, cols) = if split_cols {
                    (0..m, range.start * nr..(range.end * nr).min(n))
                } else {
                    (range.start * mr..(range.end * mr).min(m), 0..n)
                };
                // SAFETY: tasks get disjoint row or column ranges of C (parallel_for hands out
                // disjoint item ranges), inside the region the caller vouched for.
                let result = unsafe {
                    let c = c.at(rows.start, cols.start);
                    self.task(
                        rows.len(),
                        cols.len(),
                        k,
                        a.at(rows.start, 0),
                        b.at(0, cols.start),
                        c,
                    )
                };
                if let Err(e) = result {
                    *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            });
        match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs the blocked loop nest for `C = A · B` (`m × n`, depth `k`) on the calling
    /// thread.
    ///
    /// # Safety
    ///
    /// As [`Gemm::gemm`].
    pub(crate) unsafe fn task(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: OutPtr,
    ) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            for i in 0..m {
                // SAFETY: row `i` of the caller's `m × n` region.
                unsafe { std::slice::from_raw_parts_mut(c.ptr.add(i * c.ldc), n) }.fill(0.0);
            }
            return Ok(());
        }
        let kern = self.kernel;
        let (mr, nr) = (kern.mr, kern.nr);
        debug_assert!(kern.kc <= KC_MAX);
        let bytes = self.scratch_floats(m, n, k) * size_of::<f32>();
        let mut lease = self
            .pool
            .acquire(bytes)
            .map_err(|source| TensorError::Pool {
                op: "matmul",
                source,
            })?;
        let scratch = &mut lease.as_mut_slice::<f32>()[..bytes / size_of::<f32>()];
        let a_len = m.min(kern.mc).div_ceil(mr) * mr * k.min(kern.kc);
        let (a_pack, b_pack) = scratch.split_at_mut(a_len);
        let mut tile = [0f32; 16 * 32];
        for jc in (0..n).step_by(kern.nc) {
            let nc = (n - jc).min(kern.nc);
            for pc in (0..k).step_by(kern.kc) {
                let kc = (k - pc).min(kern.kc);
                let accumulate = pc > 0;
                pack_panels(b.at(pc, jc), nr, nc, b.cs, kc, b.rs, b_pack);
                for ic in (0..m).step_by(kern.mc) {
                    let mc = (m - ic).min(kern.mc);
                    pack_panels(a.at(ic, pc), mr, mc, a.rs, kc, a.cs, a_pack);
                    for jr in (0..nc).step_by(nr) {
                        let nw = (nc - jr).min(nr);
                        let bp = b_pack[jr * kc..].as_ptr();
                        for ir in (0..mc).step_by(mr) {
                            let mh = (mc - ir).min(mr);
                            let ap = a_pack[ir * kc..].as_ptr();
                            // SAFETY: (ic + ir, jc + jr) lies inside this task's region.
                            let ct = unsafe { c.at(ic + ir, jc + jr) };
                            if mh == mr && nw == nr {
                                // SAFETY: the kernel was selected after feature detection;
                                // the panels hold `kc` steps; the tile is inside C.
                                unsafe { (kern.run)(kc, ap, bp, ct.ptr, ct.ldc, accumulate) };
                            } else {
                                // SAFETY: as above, into the local full-size tile.
                                unsafe { (kern.run)(kc, ap, bp, tile.as_mut_ptr(), nr, false) };
                                for i in 0..mh {
                                    // SAFETY: row `i` of the partial tile lies inside C.
                                    let row = unsafe {
                                        std::slice::from_raw_parts_mut(ct.ptr.add(i * ct.ldc), nw)
                                    };
                                    let src = &tile[i * nr..i * nr + nw];
                                    if accumulate {
                                        row.iter_mut().zip(src).for_each(|(o, s)| *o += s);
                                    } else {
                                        row.copy_from_slice(src);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
