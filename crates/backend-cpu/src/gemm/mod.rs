//! f32 GEMM: `C = A · B` over strided F32/F16/BF16 operands, cache-blocked with packed
//! panels and a register-tiled micro-kernel per ISA (AVX-512 16×16, AVX2+FMA 6×16,
//! portable).
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
//! never copied whole, converts F16/BF16 (and dequantizes blocks) on the way, and
//! prefetches the source runs it reads next. With enough rows per thread, the tasks pack
//! each B block together into one shared scratch (`KC · NC` f32s) and then split the
//! rows of C, each packing its own A panels (`MC · KC`): nothing is packed twice, as in
//! BLIS. With few rows they split the columns and each packs the short A itself. Scratch
//! comes from the pool.

mod dequant;
pub(crate) use dequant::dequantize_blocks_inline;
#[cfg(target_arch = "x86_64")]
mod dequant_avx2;
pub(crate) mod dot_rows;
mod kernel_avx2;
#[cfg(target_arch = "x86_64")]
mod kernel_avx512;
mod kernel_scalar;
pub(crate) mod operand;
mod pack;
#[cfg(target_arch = "x86_64")]
mod pack_avx2;
#[cfg(test)]
pub(crate) mod probe;

use std::ops::Range;

use tempra_pool::HostPool;
use tempra_tensor::Result;

pub(crate) use operand::{MatRef, Values};
use pack::{KC_MAX, PackOps, pack_panels};

use crate::isa::{Isa, Level};
use crate::parallel::{DisjointWrites, Parallel, TaskErrors};
use crate::task_scratch::{self, TaskScratch};

/// A micro-kernel and the blocking that suits it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmKernel {
    /// Name for the probes' and tests' messages (the dispatch picks kernels by ISA
    /// level, never by name).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    mr: usize,
    nr: usize,
    kc: usize,
    mc: usize,
    nc: usize,
    /// `C[MR×NR] (+)= A_panel · B_panel`; see the kernels' safety contracts.
    run: unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool),
    /// The packing helpers of the same ISA.
    pack: PackOps,
}

impl GemmKernel {
    /// `C[0..mc, 0..nc] (+)= A · B` from packed A panels (`mc` rows, see
    /// [`GemmKernel::pack_a`]) and packed B panels (`nc` columns, [`GemmKernel::pack_b`]),
    /// both of depth `kc`: the micro-kernel over every tile (the macro-kernel of the
    /// blocked loop nest, and the products of blocked attention).
    ///
    /// # Safety
    ///
    /// `c` addresses an `mc × nc` region valid for reads and writes that nothing else
    /// touches during the call; the packs hold whole panels for `mc` rows and `nc` columns.
    pub(crate) unsafe fn packed_product(
        &self,
        a_pack: &[f32],
        mc: usize,
        b_pack: &[f32],
        nc: usize,
        kc: usize,
        c: OutPtr,
        accumulate: bool,
    ) {
        let kern = self;
        let (mr, nr) = (kern.mr, kern.nr);
        assert!(
            a_pack.len() >= mc.div_ceil(mr) * mr * kc && b_pack.len() >= nc.div_ceil(nr) * nr * kc,
            "packed panels shorter than the product"
        );
        // Partial tiles go through a full-size local tile, zeroed only if one occurs (a
        // blocked attention calls this twice per key block, all tiles full).
        let mut tile_buf: Option<[f32; 16 * 32]> = None;
        for jr in (0..nc).step_by(nr) {
            let nw = (nc - jr).min(nr);
            let bp = b_pack[jr * kc..].as_ptr();
            for ir in (0..mc).step_by(mr) {
                let mh = (mc - ir).min(mr);
                let ap = a_pack[ir * kc..].as_ptr();
                // SAFETY: (ir, jr) lies inside the caller's region.
                let ct = unsafe { c.at(ir, jr) };
                if mh == mr && nw == nr {
                    // SAFETY: the kernel was selected after feature detection; the panels
                    // hold `kc` steps; the tile is inside C.
                    unsafe { (kern.run)(kc, ap, bp, ct.ptr(), ct.ldc(), accumulate) };
                } else {
                    let tile = tile_buf.get_or_insert([0.0; 16 * 32]);
                    // SAFETY: as above, into the local full-size tile.
                    unsafe { (kern.run)(kc, ap, bp, tile.as_mut_ptr(), nr, false) };
                    for i in 0..mh {
                        // SAFETY: row `i` of the partial tile lies inside C.
                        let row = unsafe {
                            std::slice::from_raw_parts_mut(ct.ptr().add(i * ct.ldc()), nw)
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

    /// Packs `rows × kc` values of `src` (row `i`, depth `p` at element
    /// `i · row_stride + p · k_stride` past its offset) into this kernel's A panels:
    /// `rows.div_ceil(mr) · mr · kc` f32s of `dst`, zero-padded rows.
    pub(crate) fn pack_a(
        &self,
        src: MatRef<'_>,
        rows: usize,
        row_stride: usize,
        kc: usize,
        k_stride: usize,
        dst: &mut [f32],
    ) {
        pack_panels(self.pack, src, self.mr, rows, row_stride, kc, k_stride, dst);
    }

    /// Packs `cols × kc` values of `src` (column `j`, depth `p` at element `j ·
    /// col_stride + p · k_stride`) into this kernel's B panels: `cols.div_ceil(nr) · nr ·
    /// kc` f32s of `dst`, zero-padded columns.
    pub(crate) fn pack_b(
        &self,
        src: MatRef<'_>,
        cols: usize,
        col_stride: usize,
        kc: usize,
        k_stride: usize,
        dst: &mut [f32],
    ) {
        pack_panels(self.pack, src, self.nr, cols, col_stride, kc, k_stride, dst);
    }

    /// f32s of packed A panels for `rows` rows of depth `kc`.
    pub(crate) fn a_panels_len(&self, rows: usize, kc: usize) -> usize {
        rows.div_ceil(self.mr) * self.mr * kc
    }

    /// f32s of packed B panels for `cols` columns of depth `kc`.
    pub(crate) fn b_panels_len(&self, cols: usize, kc: usize) -> usize {
        cols.div_ceil(self.nr) * self.nr * kc
    }
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
    pack: PackOps {
        transpose16: None,
        transpose16_f16: None,
        transpose6: None,
        rows16_f16: None,
        f16_to_f32: None,
        dequantize: None,
    },
};

// Dequantize-while-packing reads whole blocks: every depth block must cover whole
// 256-value K-quant super-blocks (and so whole 32-value blocks).
const _: () = assert!(SCALAR.kc.is_multiple_of(256) && SCALAR.kc <= KC_MAX);
#[cfg(target_arch = "x86_64")]
const _: () = assert!(AVX2.kc.is_multiple_of(256) && AVX2.kc <= KC_MAX);
#[cfg(target_arch = "x86_64")]
const _: () = assert!(AVX512.kc.is_multiple_of(256) && AVX512.kc <= KC_MAX);

/// The AVX2+FMA kernel; only hand it out after runtime detection.
#[cfg(target_arch = "x86_64")]
const AVX2: GemmKernel = GemmKernel {
    name: "avx2",
    mr: kernel_avx2::MR,
    nr: kernel_avx2::NR,
    kc: 256,
    mc: 72,
    nc: 3072,
    // SAFETY (of later calls): `avx2_kernel` is only returned when AVX2, FMA and F16C were
    // detected at run time.
    run: avx2_entry,
    pack: PackOps {
        transpose16: Some(pack_avx2::transpose16),
        transpose16_f16: Some(pack_avx2::transpose16_f16),
        transpose6: Some(pack_avx2::transpose6),
        rows16_f16: Some(pack_avx2::rows16_f16),
        f16_to_f32: Some(pack_avx2::f16_to_f32),
        dequantize: Some(dequant::dequantize_blocks_avx2),
    },
};

/// The AVX-512 kernel: a 16×16 tile (see [`kernel_avx512`]) with the AVX2 packing
/// helpers (its panels are 16 wide, as the AVX2 kernel's B panels); only hand it out
/// after runtime detection.
#[cfg(target_arch = "x86_64")]
const AVX512: GemmKernel = GemmKernel {
    name: "avx512",
    mr: kernel_avx512::MR,
    nr: kernel_avx512::NR,
    kc: 256,
    mc: 64,
    nc: 3072,
    // SAFETY (of later calls): `avx512_kernel` is only returned when AVX-512F and the
    // AVX2 set were detected at run time.
    run: avx512_entry,
    pack: AVX2.pack,
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

/// Calls the AVX-512 kernel (a plain `unsafe fn` pointer for the table).
///
/// # Safety
///
/// As [`kernel_avx512::kernel`]: AVX-512F present, panels and tile valid.
#[cfg(target_arch = "x86_64")]
unsafe fn avx512_entry(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { kernel_avx512::kernel(kc, a, b, c, ldc, acc) }
}

/// The AVX2 kernel (and packing helpers) if this CPU has AVX2, FMA and F16C.
pub(crate) fn avx2_kernel() -> Option<GemmKernel> {
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx2.is_available() {
        return Some(AVX2);
    }
    None
}

/// The AVX-512 kernel (with the AVX2 packing helpers) if this CPU runs
/// [`Isa::Avx512`].
pub(crate) fn avx512_kernel() -> Option<GemmKernel> {
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx512.is_available() {
        return Some(AVX512);
    }
    None
}

/// The fastest kernel this CPU runs.
#[cfg(test)]
pub(crate) fn best_kernel() -> GemmKernel {
    kernel_for(Level::new(Isa::best_available()).unwrap_or(Level::scalar()))
}

/// The kernel for a backend's ISA level: the 16×16 AVX-512 kernel at the AVX-512 level,
/// the 6×16 AVX2 kernel at the AVX2 level, the portable one below.
pub(crate) fn kernel_for(level: Level) -> GemmKernel {
    let kernel = match level.isa() {
        Isa::Avx512 => avx512_kernel(),
        Isa::Avx2 => avx2_kernel(),
        Isa::Scalar => None,
    };
    kernel.unwrap_or(SCALAR)
}

/// Work below this many multiply-adds stays on the calling thread.
const MIN_PARALLEL_MACS: usize = 1 << 18;

/// The narrowest share of the output columns one task gets when the tasks split columns:
/// each such task packs all of A again, and packing a value costs about as much as ten
/// multiply-adds at peak, so the repacking costs about `10 / edge` of its time.
const MIN_TASK_EDGE: usize = 384;

/// Rows of C per thread from which the tasks share one packed B block and split the rows
/// (no operand is packed twice); below it they split the columns and each packs the
/// (short) A whole.
const MIN_SHARED_ROWS: usize = 48;

/// The fewest B panels one task packs when the tasks pack a shared B block together.
const MIN_PACK_PANELS: usize = 8;

/// The output matrix: `m × n` f32s at `ptr` with row stride `ldc`.
///
/// Shared by the tasks of one product, each writing only its own disjoint tile range of C
/// (see `gemm`); the product returns only after every task ended ([`DisjointWrites`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutPtr {
    c: DisjointWrites<f32>,
    ldc: usize,
}

impl OutPtr {
    /// The output over `c`, a row-major matrix with row stride `ldc`.
    pub(crate) fn new(c: &mut [f32], ldc: usize) -> Self {
        Self {
            c: DisjointWrites::new(c),
            ldc,
        }
    }

    /// The matrix's first element (row stride [`Self::ldc`]).
    pub(crate) fn ptr(&self) -> *mut f32 {
        self.c.ptr()
    }

    /// The row stride.
    pub(crate) fn ldc(&self) -> usize {
        self.ldc
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
            std::slice::from_raw_parts_mut(self.ptr().add(i * self.ldc + cols.start), cols.len())
        }
    }

    /// The view moved to element `(i, j)`.
    ///
    /// # Safety
    ///
    /// `(i, j)` lies inside the matrix this pointer was made for.
    pub(crate) unsafe fn at(self, i: usize, j: usize) -> Self {
        // SAFETY: in bounds by the caller's contract.
        let c = unsafe { self.c.add(i * self.ldc + j) };
        Self { c, ldc: self.ldc }
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
    /// `C = A · B` for `A [m, k]`, `B [k, n]` into `c` (an `m × n` matrix with row stride
    /// `ldc` that no one else touches during the call), split over the worker pool.
    ///
    /// With enough rows per thread the tasks pack each B block together into one shared
    /// scratch and then split the rows of C, each packing only its own rows of A (BLIS's
    /// scheme: nothing is packed twice, the B block is read from the shared cache by all).
    /// With few rows they split the columns, and each packs the short A itself.
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
        let threads = self.par.threads();
        if threads <= 1 || macs < MIN_PARALLEL_MACS || k == 0 {
            // SAFETY: forwarded contract.
            return unsafe { self.task(m, n, k, a, b, c) };
        }
        if m >= threads * MIN_SHARED_ROWS {
            // SAFETY: forwarded contract.
            return unsafe { self.shared_b(m, n, k, a, b, c) };
        }
        let nr = self.kernel.nr;
        let errors = TaskErrors::default();
        let items = n.div_ceil(nr);
        // Each task packs all of A again: keep its share of the columns wide enough
        // ([`MIN_TASK_EDGE`]) that this stays a few percent of its work.
        let edge_items = if n >= threads * MIN_TASK_EDGE {
            MIN_TASK_EDGE.div_ceil(nr)
        } else {
            1
        };
        let min_items = MIN_PARALLEL_MACS.div_ceil(m * k * nr).max(edge_items);
        let scratch = self.task_scratch(m, n, k, items, min_items)?;
        self.par
            .parallel_for(items, min_items, &|range: Range<usize>| {
                let cols = range.start * nr..(range.end * nr).min(n);
                let result = scratch.with(|buf| {
                    // SAFETY: tasks get disjoint column ranges of C (parallel_for hands
                    // out disjoint item ranges), inside the region the caller vouched
                    // for; `buf` holds `task_floats(m, n, k)` f32s, enough for fewer
                    // columns.
                    unsafe {
                        self.task_in(
                            m,
                            cols.len(),
                            k,
                            a,
                            b.at(0, cols.start),
                            c.at(0, cols.start),
                            buf,
                        )
                    }
                });
                errors.record(result);
            });
        errors.finish()
    }

    /// The f32s of scratch one [`Gemm::task`] over `m × n` (depth `k`) packs into: a B
    /// block and an A block.
    fn task_floats(&self, m: usize, n: usize, k: usize) -> usize {
        self.b_block_floats(n, k) + self.a_block_floats(m, k)
    }

    /// Scratch for the parallel tasks of one call over `n_items` (at least `min_items` per
    /// task), each a [`Gemm::task_in`] over at most `m × n` (depth `k`): one part per task
    /// that can run at once, leased once here (see [`TaskScratch`]).
    pub(crate) fn task_scratch(
        &self,
        m: usize,
        n: usize,
        k: usize,
        n_items: usize,
        min_items: usize,
    ) -> Result<TaskScratch> {
        let slots = task_scratch::max_tasks(self.par.threads(), n_items, min_items);
        TaskScratch::new(self.pool, "matmul", slots, self.task_floats(m, n, k))
    }

    /// The shared-B schedule of [`Gemm::gemm`]: per B block, one job packs its panels
    /// (tasks take disjoint panel ranges) and a second splits the rows of C.
    ///
    /// # Safety
    ///
    /// As [`Gemm::gemm`]; `k > 0`.
    unsafe fn shared_b(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: OutPtr,
    ) -> Result<()> {
        let kern = self.kernel;
        let (mr, nr) = (kern.mr, kern.nr);
        let mut lease = task_scratch::acquire(self.pool, "matmul", self.b_block_floats(n, k))?;
        // Written by the packing tasks in disjoint panel ranges, then only read by the
        // row tasks after the packing job has returned.
        let b_pack = DisjointWrites::new(lease.as_mut_slice::<f32>());
        // The row tasks' A blocks: one part per task that can run at once, leased once
        // for the whole call.
        let slots = task_scratch::max_tasks(self.par.threads(), m.div_ceil(mr), 1);
        let a_scratch = TaskScratch::new(self.pool, "matmul", slots, self.a_block_floats(m, k))?;
        let errors = TaskErrors::default();
        for jc in (0..n).step_by(kern.nc) {
            let nc = (n - jc).min(kern.nc);
            let panels = nc.div_ceil(nr);
            for pc in (0..k).step_by(kern.kc) {
                let kc = (k - pc).min(kern.kc);
                self.par
                    .parallel_for(panels, MIN_PACK_PANELS, &|range: Range<usize>| {
                        let cols = range.start * nr..(range.end * nr).min(nc);
                        // SAFETY: panels `range` of the block lie inside the lease
                        // (`panels · nr · kc ≤ b_block_floats`); tasks get disjoint ranges.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                b_pack.ptr().add(range.start * nr * kc),
                                range.len() * nr * kc,
                            )
                        };
                        pack_panels(
                            kern.pack,
                            b.at(pc, jc + cols.start),
                            nr,
                            cols.len(),
                            b.cs,
                            kc,
                            b.rs,
                            dst,
                        );
                    });
                // SAFETY: the packing job has returned; from here on the block is read only.
                let packed = unsafe { std::slice::from_raw_parts(b_pack.ptr(), panels * nr * kc) };
                self.par
                    .parallel_for(m.div_ceil(mr), 1, &|range: Range<usize>| {
                        let rows = range.start * mr..(range.end * mr).min(m);
                        let result = a_scratch.with(|a_pack| {
                            // SAFETY: tasks get disjoint row ranges of C inside the
                            // caller's region; the block's columns `jc..jc + nc` lie
                            // inside it too; `a_pack` holds an A block of depth `k`.
                            unsafe {
                                self.row_blocks(
                                    rows.len(),
                                    a.at(rows.start, pc),
                                    kc,
                                    packed,
                                    nc,
                                    c.at(rows.start, jc),
                                    pc > 0,
                                    a_pack,
                                )
                            }
                        });
                        errors.record(result);
                    });
            }
        }
        errors.finish()
    }

    /// The f32s of one packed B block of a product with `n` columns and depth `k` (a
    /// narrow or shallow product packs smaller blocks).
    fn b_block_floats(&self, n: usize, k: usize) -> usize {
        let kern = self.kernel;
        n.min(kern.nc).div_ceil(kern.nr) * kern.nr * k.min(kern.kc)
    }

    /// The f32s of one packed A block of a product with `m` rows and depth `k`.
    fn a_block_floats(&self, m: usize, k: usize) -> usize {
        let kern = self.kernel;
        m.min(kern.mc).div_ceil(kern.mr) * kern.mr * k.min(kern.kc)
    }

    /// `C[0..m, 0..nc] (+)= A[0..m, 0..kc] · B_block` for one packed B block, packing `A`
    /// `mc` rows at a time into `a_pack` (at least `a_block_floats(m, kc)` f32s).
    ///
    /// # Safety
    ///
    /// `c` addresses an `m × nc` region valid for reads and writes that nothing else
    /// touches during the call; `packed` holds the `nc.div_ceil(nr)` panels of depth `kc`.
    unsafe fn row_blocks(
        &self,
        m: usize,
        a: MatRef<'_>,
        kc: usize,
        packed: &[f32],
        nc: usize,
        c: OutPtr,
        accumulate: bool,
        a_pack: &mut [f32],
    ) -> Result<()> {
        let kern = self.kernel;
        let mr = kern.mr;
        for ic in (0..m).step_by(kern.mc) {
            let mc = (m - ic).min(kern.mc);
            pack_panels(kern.pack, a.at(ic, 0), mr, mc, a.rs, kc, a.cs, a_pack);
            // SAFETY: rows `ic..ic + mc` of the caller's region.
            unsafe { kern.packed_product(a_pack, mc, packed, nc, kc, c.at(ic, 0), accumulate) };
        }
        Ok(())
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
        let mut lease = task_scratch::acquire(self.pool, "matmul", self.task_floats(m, n, k))?;
        // SAFETY: forwarded contract; the lease holds `task_floats(m, n, k)` f32s.
        unsafe { self.task_in(m, n, k, a, b, c, lease.as_mut_slice::<f32>()) }
    }

    /// [`Gemm::task`] packing into `scratch` (at least `task_floats(m, n, k)` f32s).
    ///
    /// # Safety
    ///
    /// As [`Gemm::gemm`].
    pub(crate) unsafe fn task_in(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<'_>,
        b: MatRef<'_>,
        c: OutPtr,
        scratch: &mut [f32],
    ) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            for i in 0..m {
                // SAFETY: row `i` of the caller's `m × n` region.
                unsafe { std::slice::from_raw_parts_mut(c.ptr().add(i * c.ldc()), n) }.fill(0.0);
            }
            return Ok(());
        }
        let kern = self.kernel;
        let nr = kern.nr;
        debug_assert!(kern.kc <= KC_MAX);
        let (b_pack, a_pack) = scratch.split_at_mut(self.b_block_floats(n, k));
        for jc in (0..n).step_by(kern.nc) {
            let nc = (n - jc).min(kern.nc);
            for pc in (0..k).step_by(kern.kc) {
                let kc = (k - pc).min(kern.kc);
                pack_panels(kern.pack, b.at(pc, jc), nr, nc, b.cs, kc, b.rs, b_pack);
                // SAFETY: the block's columns `jc..jc + nc` of all `m` rows lie inside the
                // caller's region.
                unsafe {
                    self.row_blocks(m, a.at(0, pc), kc, b_pack, nc, c.at(0, jc), pc > 0, a_pack)?
                };
            }
        }
        Ok(())
    }
}
