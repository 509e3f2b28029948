//! Blocked attention for prefill: a tile of up to [`WIDE_ROWS`] query rows that share a
//! KV head (a GQA group's heads at several positions, or one head at many) against
//! blocks of [`BLOCK`] keys, both products — scores `Q·Kᵀ` and outputs `P·V` — run
//! through the f32 GEMM's packed panels and register-tiled micro-kernel.
//!
//! The narrow tile (`attention.rs`) forms each score as a dot product (a load per
//! multiply-add and a horizontal sum per key) and suits decode's few rows. With tens of
//! rows the key and value blocks are worth packing: each is converted from f16 and laid
//! out as the kernel's B panels once per block, the queries as A panels once per tile,
//! and the micro-kernel keeps a tile of scores (or outputs) in registers, as a GEMM does
//! (AVX2 6×16: two loads for twelve multiply-adds; AVX-512 16×16). The online softmax in between is the narrow
//! tile's ([`softmax_step`]), row by row over a block's scores.

use super::attention::{
    BLOCK, KvData, KvRows, Running, Tile, key_union, normalize_rows, pad, softmax_block,
};
use crate::gemm::{GemmKernel, MatRef, OutPtr, Values};
use crate::simd::{Simd, simd_dispatch};

/// Most query rows in one blocked tile: eight 6-row panels of the AVX2 kernel, three
/// 16-row ones of the AVX-512 kernel (a GQA group of eight heads at six positions, or
/// one head at 48).
pub(crate) const WIDE_ROWS: usize = 48;

/// The scratch of one blocked tile, carved from one buffer (a pool lease per task).
#[derive(Debug)]
pub(crate) struct WideScratch<'a> {
    /// The tile's queries as A panels (depth D).
    q: &'a mut [f32],
    /// A key block as B panels (depth D, `BLOCK` columns).
    k: &'a mut [f32],
    /// A value block as B panels (depth `BLOCK`, Dv columns).
    v: &'a mut [f32],
    /// `WIDE_ROWS × BLOCK` scores, then weights.
    scores: &'a mut [f32],
    /// The weights as A panels (depth `BLOCK`).
    p: &'a mut [f32],
    /// `WIDE_ROWS × pad(Dv)` output accumulators (rows padded for the softmax's whole
    /// vectors).
    acc: &'a mut [f32],
    /// Dv.
    dv: usize,
}

impl<'a> WideScratch<'a> {
    /// The f32s [`WideScratch::new`] needs for head dims `d` (queries, keys) and `dv`
    /// (values) with kernel `kern`.
    pub(crate) fn len(kern: &GemmKernel, d: usize, dv: usize) -> usize {
        kern.a_panels_len(WIDE_ROWS, d)
            + kern.b_panels_len(BLOCK, d)
            + kern.b_panels_len(dv, BLOCK)
            + WIDE_ROWS * BLOCK
            + kern.a_panels_len(WIDE_ROWS, BLOCK)
            + WIDE_ROWS * pad(dv)
    }

    /// Scratch in `buf` (at least [`WideScratch::len`] f32s).
    pub(crate) fn new(kern: &GemmKernel, d: usize, dv: usize, buf: &'a mut [f32]) -> Self {
        let (q, rest) = buf.split_at_mut(kern.a_panels_len(WIDE_ROWS, d));
        let (k, rest) = rest.split_at_mut(kern.b_panels_len(BLOCK, d));
        let (v, rest) = rest.split_at_mut(kern.b_panels_len(dv, BLOCK));
        let (scores, rest) = rest.split_at_mut(WIDE_ROWS * BLOCK);
        let (p, rest) = rest.split_at_mut(kern.a_panels_len(WIDE_ROWS, BLOCK));
        let acc = &mut rest[..WIDE_ROWS * pad(dv)];
        WideScratch {
            q,
            k,
            v,
            scores,
            p,
            acc,
            dv,
        }
    }
}

/// An operand view of the KV rows `j0 ..` of one head.
fn kv_view(data: KvData<'_>, rows: KvRows, j0: usize) -> MatRef<'_> {
    MatRef {
        values: match data {
            KvData::F32(v) => Values::F32(v),
            KvData::F16(v) => Values::F16(v),
            // The op stages block-quantized keys and values through the narrow kernel.
            KvData::Blocks(..) => unreachable!("blocked attention over a quantized KV cache"),
        },
        offset: rows.base + j0 * rows.stride,
        rs: rows.stride,
        cs: 1,
    }
}

/// Row-major f32 rows `stride` apart as an operand view.
fn rows_view(values: &[f32], stride: usize) -> MatRef<'_> {
    MatRef {
        values: Values::F32(values),
        offset: 0,
        rs: stride,
        cs: 1,
    }
}

/// Attends one blocked tile (rows `1..=WIDE_ROWS`, queries `tile.q` row-major with row
/// stride `pad(D)`): `out` (`rows × Dv`, contiguous) as the narrow tile computes it.
#[inline(always)]
fn attend_wide<S: Simd>(
    s: S,
    kern: GemmKernel,
    tile: &Tile<'_>,
    k: KvData<'_>,
    kr: KvRows,
    v: KvData<'_>,
    vr: KvRows,
    scratch: &mut WideScratch<'_>,
    out: &mut [f32],
) {
    let rows = tile.rows.min(WIDE_ROWS);
    let (d, dv) = (kr.dim, vr.dim);
    assert!(
        dv == scratch.dv && out.len() >= rows * dv && tile.keys.len() >= rows,
        "blocked attention tile and its scratch disagree"
    );
    let out = &mut out[..rows * dv];
    let row_keys = &tile.keys[..rows];
    let Some((first, end)) = key_union(row_keys) else {
        out.fill(0.0);
        return;
    };
    let dp = pad(d);
    kern.pack_a(rows_view(tile.q, dp), rows, dp, d, 1, scratch.q);
    let dvp = pad(dv);
    let acc = &mut scratch.acc[..rows * dvp];
    acc.fill(0.0);
    let mut m = [f32::NEG_INFINITY; WIDE_ROWS];
    let mut l = [0.0f32; WIDE_ROWS];
    for r in 0..rows {
        (m[r], l[r]) = tile.initial_state(r);
    }
    // Blocks start at multiples of BLOCK, not at the tile's first key: a row's result
    // then depends on its own keys only, not on which rows share its tile (the tiles
    // differ with the thread count; masked keys add exact zeros).
    let mut j0 = first - first % BLOCK;
    while j0 < end {
        let nb = (j0 + BLOCK).min(end) - j0;
        // Scores: keys j0.. as B panels (column jj = key j0 + jj, depth = head dim).
        kern.pack_b(kv_view(k, kr, j0), nb, kr.stride, d, 1, scratch.k);
        let scores = OutPtr::new(scratch.scores, BLOCK);
        // SAFETY: the packs hold `rows` A rows and `nb` B columns of depth `d`; the
        // `rows × nb` scores lie inside the `WIDE_ROWS × BLOCK` scratch, written by this
        // call alone.
        unsafe { kern.packed_product(scratch.q, rows, scratch.k, nb, d, scores, false) };
        let running = Running {
            m: &mut m[..rows],
            l: &mut l[..rows],
            acc,
            stride: dvp,
        };
        softmax_block(s, scratch.scores, nb, j0, row_keys, tile.softcap, running);
        // Outputs: weights as A panels (depth = the block's keys), values j0.. as B panels
        // (column = value dim).
        kern.pack_a(
            rows_view(scratch.scores, BLOCK),
            rows,
            BLOCK,
            nb,
            1,
            scratch.p,
        );
        kern.pack_b(kv_view(v, vr, j0), dv, 1, nb, vr.stride, scratch.v);
        let acc_out = OutPtr::new(acc, dvp);
        // SAFETY: the packs hold `rows` A rows and `dv` B columns of depth `nb`; the
        // `rows × dv` accumulators (row stride `dvp`) lie in the slice `acc`, used by
        // nothing else meanwhile.
        unsafe { kern.packed_product(scratch.p, rows, scratch.v, dv, nb, acc_out, true) };
        j0 += nb;
    }
    normalize_rows(acc, dvp, &l[..rows], dv, out);
}

simd_dispatch! {
    /// Attends one blocked tile (see [`attend_wide`]) with the product kernel `kern`.
    pub(crate) fn attend_wide_rows(
        kern: GemmKernel,
        tile: &Tile<'_>,
        k: KvData<'_>,
        kr: KvRows,
        v: KvData<'_>,
        vr: KvRows,
        scratch: &mut WideScratch<'_>,
        out: &mut [f32],
    ) -> () = attend_wide;
}
