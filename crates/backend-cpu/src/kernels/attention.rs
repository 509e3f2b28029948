//! The fused causal attention tile: a few query rows that share one KV head (the query
//! heads of a GQA group, at one or several consecutive positions) against a contiguous
//! range of keys, with an online softmax over blocks of keys (aligned to multiples of
//! [`BLOCK`]). Row-invariant: a row's output is the same bits alone (decode) as in a tile
//! of eight (prefill), whichever rows share the tile: the same score reduction
//! ([`Simd::reduce_add`] and [`Simd::reduce_add_x8`] associate alike), the same blocks,
//! masked keys adding exact zeros. No score matrix is formed:
//! scores live in a `rows × BLOCK` scratch, the running output in a `rows × Dv`
//! accumulator, both on the caller's stack.
//!
//! Keys and values are f32 or f16, read where they lie, or block-quantized (a Q8_0 or Q4_0
//! cache): then each block of keys and its values are dequantized into a staging buffer
//! (exactly as the reference dequantizes) and the block runs the f32 arithmetic.
//!
//! With eight rows each key row is loaded (and converted from f16) once per tile and used
//! by every row; with fewer, each row takes eight keys at a time (the block's key rows
//! stay in L1), so a one-row tile — every tile of a model without GQA — still has eight
//! independent sums. The value accumulation keeps the rows' accumulators for one to
//! eight vectors of `Dv` (more for fewer rows) in registers while it walks the block's
//! keys. Rows at different positions see different
//! keys (causal mask, sliding window): the tile walks the union of their ranges and masks
//! each row's scores outside its own.

use std::ops::Range;

use half::f16;
use tempra_tensor::DType;

use crate::gemm::dequantize_blocks_inline;
use crate::kernels::reduce::max_row;
use crate::math;
use crate::prefetch::prefetch;
use crate::simd::{Lane, Simd, simd_dispatch};

/// Keys per online-softmax block.
pub(crate) const BLOCK: usize = 64;
/// Most query rows in one tile.
pub(crate) const MAX_ROWS: usize = 8;
/// Largest head dim (D and Dv) the fused kernel takes; larger heads use the reference.
pub(crate) const MAX_HEAD_DIM: usize = 512;
/// Head dims are padded to this many values in the scratch buffers (a multiple of
/// every ISA's lane count).
pub(crate) const PAD: usize = 16;

/// K or V data: the storage of one operand, f32, f16 or a 32-value block format.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KvData<'a> {
    /// f32 storage.
    F32(&'a [f32]),
    /// f16 storage.
    F16(&'a [f16]),
    /// Blocks of a 32-value format (Q8_0, Q4_0: a quantized KV cache), as bytes; rows
    /// are whole blocks and [`KvRows`] counts in blocks.
    Blocks(DType, &'a [u8]),
}

impl KvData<'_> {
    /// Whether the data is block-quantized (read through the staging buffer).
    pub(crate) fn is_blocks(&self) -> bool {
        matches!(self, KvData::Blocks(..))
    }
}

/// Where the rows of one KV head live: row `j` is `dim` values at `base + j·stride`
/// (storage units: values, or blocks for [`KvData::Blocks`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvRows {
    /// Storage unit of row 0.
    pub base: usize,
    /// Units between consecutive rows (keys).
    pub stride: usize,
    /// Values per row (contiguous).
    pub dim: usize,
}

impl KvRows {
    /// The same rows from row `j` on (row `j` becomes row 0).
    #[inline(always)]
    fn starting_at(self, j: usize) -> KvRows {
        KvRows {
            base: self.base + j * self.stride,
            ..self
        }
    }
}

/// One tile's query rows and where its output goes.
#[derive(Debug)]
pub(crate) struct Tile<'a> {
    /// `rows` query rows, each `pad(D)` values (scaled by the attention scale, zero
    /// padded).
    pub q: &'a [f32],
    /// Query rows in the tile (1..=MAX_ROWS).
    pub rows: usize,
    /// The keys row `r` sees (`rows` ranges; an empty range gives a zero row).
    pub keys: &'a [Range<usize>],
    /// Logit soft-cap.
    pub softcap: Option<f32>,
    /// Per row the attention sink's logit (`rows` values, not capped), if the op has
    /// sinks.
    pub sinks: Option<&'a [f32]>,
}

impl Tile<'_> {
    /// Row `r`'s online softmax state before its first key: the sink as the running
    /// maximum with a weight of one (it joins the sum, with no value), or nothing.
    #[inline(always)]
    pub(crate) fn initial_state(&self, r: usize) -> (f32, f32) {
        match self.sinks {
            Some(s) if s[r] > f32::NEG_INFINITY => (s[r], 1.0),
            _ => (f32::NEG_INFINITY, 0.0),
        }
    }
}

/// Per-call scratch (on the caller's stack, reused across tiles).
#[derive(Debug)]
pub(crate) struct Scratch {
    /// `MAX_ROWS × BLOCK` scores.
    pub scores: [f32; MAX_ROWS * BLOCK],
    /// `MAX_ROWS × MAX_HEAD_DIM` output accumulators.
    pub acc: [f32; MAX_ROWS * MAX_HEAD_DIM],
}

impl Scratch {
    /// Zeroed scratch.
    pub(crate) fn new() -> Scratch {
        Scratch {
            scores: [0.0; MAX_ROWS * BLOCK],
            acc: [0.0; MAX_ROWS * MAX_HEAD_DIM],
        }
    }
}

/// The f32s of the staging buffer a tile over block-quantized keys or values needs
/// ([`attend_tile_rows`]'s `staging`): one block of keys and one of values.
pub(crate) fn staging_len(d: usize, dv: usize) -> usize {
    BLOCK * (d + dv)
}

/// `n` rounded up to [`PAD`].
#[inline(always)]
pub(crate) fn pad(n: usize) -> usize {
    n.div_ceil(PAD) * PAD
}

/// The online softmax state of a tile's rows: per row the running maximum and sum.
struct RowState {
    m: [f32; MAX_ROWS],
    l: [f32; MAX_ROWS],
}

/// Attends one tile: `out` (`rows × Dv`, contiguous) gets each row's softmax-weighted sum
/// of the value rows over its range of `tile.keys`; zeros when that range is empty.
/// Float keys and values are read where they lie; when either is block-quantized, each
/// block of keys and its values are first converted into `staging` (at least
/// [`staging_len`] f32s): the same values for a row whichever tile it is in.
#[inline(always)]
fn attend_tile<S: Simd>(
    s: S,
    tile: &Tile<'_>,
    k: KvData<'_>,
    kr: KvRows,
    v: KvData<'_>,
    vr: KvRows,
    scratch: &mut Scratch,
    staging: &mut [f32],
    out: &mut [f32],
) {
    let rows = tile.rows.min(MAX_ROWS);
    let (d, dv) = (kr.dim, vr.dim);
    let dvp = pad(dv);
    let out = &mut out[..rows * dv];
    let row_keys = &tile.keys[..rows];
    let Some((first, end)) = key_union(row_keys) else {
        out.fill(0.0);
        return;
    };
    scratch.acc[..rows * dvp].fill(0.0);
    let mut state = RowState {
        m: [f32::NEG_INFINITY; MAX_ROWS],
        l: [0.0; MAX_ROWS],
    };
    for r in 0..rows {
        (state.m[r], state.l[r]) = tile.initial_state(r);
    }
    let prefetch = |keys: Range<usize>| {
        prefetch_rows(k, kr, keys.clone());
        prefetch_rows(v, vr, keys);
    };
    // Blocks start at multiples of BLOCK, not at the tile's first key: a row's blocks (and
    // so its online softmax) are then the same whichever rows share its tile; keys before
    // the row's own range are masked.
    let mut j0 = first - first % BLOCK;
    prefetch(j0..end.min(j0 + BLOCK));
    while j0 < end {
        let nb = BLOCK.min(end - j0);
        let mut cx = BlockContext {
            tile,
            block: KeyBlock { j0, nb, end },
            scratch: &mut *scratch,
            state: &mut state,
        };
        let (kb, vb) = (kr.starting_at(j0), vr.starting_at(j0));
        match (k, v) {
            (KvData::F16(k), KvData::F16(v)) => {
                attend_block(s, &mut cx, (k, kb), (v, vb), &prefetch)
            }
            (KvData::F32(k), KvData::F32(v)) => {
                attend_block(s, &mut cx, (k, kb), (v, vb), &prefetch)
            }
            (KvData::F16(k), KvData::F32(v)) => {
                attend_block(s, &mut cx, (k, kb), (v, vb), &prefetch)
            }
            (KvData::F32(k), KvData::F16(v)) => {
                attend_block(s, &mut cx, (k, kb), (v, vb), &prefetch)
            }
            _ => {
                // The next block's rows arrive while this one is converted and attended.
                if j0 + nb < end {
                    prefetch(j0 + nb..end.min(j0 + nb + BLOCK));
                }
                let (ks, vs) = staging[..BLOCK * (d + dv)].split_at_mut(BLOCK * d);
                stage_rows(k, kb, nb, ks);
                stage_rows(v, vb, nb, vs);
                let packed = |dim| KvRows {
                    base: 0,
                    stride: dim,
                    dim,
                };
                let none = |_: Range<usize>| {};
                attend_block(s, &mut cx, (&*ks, packed(d)), (&*vs, packed(dv)), &none);
            }
        }
        j0 += nb;
    }
    normalize_rows(&scratch.acc, dvp, &state.l[..rows], dv, out);
}

/// The keys `j0 .. j0 + nb` of a tile whose keys end at `end`.
#[derive(Clone, Copy)]
struct KeyBlock {
    j0: usize,
    nb: usize,
    end: usize,
}

/// `nb` rows of `data` (rows per `rows`, from its row 0) as f32, `rows.dim` values each,
/// one after another in `out`.
#[inline(always)]
fn stage_rows(data: KvData<'_>, rows: KvRows, nb: usize, out: &mut [f32]) {
    let dim = rows.dim;
    for (jj, row) in out[..nb * dim].chunks_exact_mut(dim.max(1)).enumerate() {
        let start = rows.base + jj * rows.stride;
        match data {
            KvData::F32(x) => row.copy_from_slice(&x[start..start + dim]),
            KvData::F16(x) => {
                for (o, h) in row.iter_mut().zip(&x[start..start + dim]) {
                    *o = h.to_f32();
                }
            }
            KvData::Blocks(dtype, bytes) => {
                let bb = dtype.block_bytes();
                let blocks = dim / dtype.block_len();
                dequantize_blocks_inline(dtype, &bytes[start * bb..(start + blocks) * bb], row);
            }
        }
    }
}

/// What one block's attention works on: the tile, the block's keys, the scratch and the
/// rows' online softmax state.
struct BlockContext<'a, 't> {
    tile: &'a Tile<'t>,
    block: KeyBlock,
    scratch: &'a mut Scratch,
    state: &'a mut RowState,
}

/// One block of keys (`block.j0 ..`, keys and values read from row 0 of `k` and `v`)
/// for every row of the tile: scores, the online softmax step, and the weighted values
/// added to the accumulators. `prefetch` asks for keys (absolute indices) of the next
/// block while this one is computed.
#[inline(always)]
fn attend_block<S: Simd, K: Lane, V: Lane>(
    s: S,
    cx: &mut BlockContext<'_, '_>,
    (k, kr): (&[K], KvRows),
    (v, vr): (&[V], KvRows),
    prefetch: &impl Fn(Range<usize>),
) {
    let BlockContext {
        tile,
        block,
        scratch,
        state,
    } = cx;
    let (tile, block) = (*tile, *block);
    let rows = tile.rows.min(MAX_ROWS);
    let (d, dvp) = (kr.dim, pad(vr.dim));
    let dp = pad(d);
    let KeyBlock { j0, nb, end } = block;
    // Scores of every row against the block's keys: with fewer than eight rows, eight
    // keys at a time per row (eight independent sums and one reduction per eight keys,
    // instead of a dependent chain and a horizontal sum per key and row).
    let first_single = if rows < 8 {
        let batched = nb - nb % 8;
        for jj in (0..batched).step_by(8) {
            if j0 + nb + jj < end {
                prefetch(j0 + nb + jj..(j0 + nb + jj + 8).min(end));
            }
            let starts: [usize; 8] = std::array::from_fn(|t| kr.base + (jj + t) * kr.stride);
            for r in 0..rows {
                let sc = &mut scratch.scores[r * BLOCK + jj..r * BLOCK + jj + 8];
                dots_keys(s, &tile.q[r * dp..(r + 1) * dp], k, starts, d, sc);
            }
        }
        batched
    } else {
        0
    };
    for jj in first_single..nb {
        // The next block's rows arrive while this one is computed, asked for one key per
        // key (issued as one burst, the instructions after the prefetches stalled and
        // stood out in decode attention's profile).
        if j0 + nb + jj < end {
            prefetch(j0 + nb + jj..j0 + nb + jj + 1);
        }
        let start = kr.base + jj * kr.stride;
        let krow = &k[start..start + d];
        let mut r0 = 0;
        while r0 < rows {
            let left = rows - r0;
            let q = &tile.q[r0 * dp..];
            let sc = &mut scratch.scores[r0 * BLOCK + jj..];
            r0 += match left {
                8.. => dots::<S, K, 8>(s, q, dp, krow, sc),
                4.. => dots::<S, K, 4>(s, q, dp, krow, sc),
                2.. => dots::<S, K, 2>(s, q, dp, krow, sc),
                _ => dots::<S, K, 1>(s, q, dp, krow, sc),
            };
        }
    }
    let acc = &mut scratch.acc[..rows * dvp];
    let running = Running {
        m: &mut state.m[..rows],
        l: &mut state.l[..rows],
        acc,
        stride: dvp,
    };
    softmax_block(
        s,
        &mut scratch.scores,
        nb,
        j0,
        &tile.keys[..rows],
        tile.softcap,
        running,
    );
    // Accumulate the weighted value rows.
    let mut r0 = 0;
    while r0 < rows {
        let left = rows - r0;
        let sc = &scratch.scores[r0 * BLOCK..];
        let a = &mut scratch.acc[r0 * dvp..];
        r0 += match left {
            8.. => accumulate::<S, V, 8>(s, sc, nb, v, vr, a, dvp),
            4.. => accumulate::<S, V, 4>(s, sc, nb, v, vr, a, dvp),
            2.. => accumulate::<S, V, 2>(s, sc, nb, v, vr, a, dvp),
            _ => accumulate::<S, V, 1>(s, sc, nb, v, vr, a, dvp),
        };
    }
}

/// The first key and the end of the union of the rows' key ranges (empty ranges add
/// nothing); `None` when every range is empty.
pub(crate) fn key_union(row_keys: &[Range<usize>]) -> Option<(usize, usize)> {
    let (first, end) = row_keys
        .iter()
        .filter(|k| !k.is_empty())
        .fold((usize::MAX, 0), |(a, b), k| (a.min(k.start), b.max(k.end)));
    (first < end).then_some((first, end))
}

/// The running state of a tile's online softmax: per row the maximum `m` and the sum
/// `l` so far, and the output accumulators (row `r` at `acc[r · stride ..]`).
#[derive(Debug)]
pub(crate) struct Running<'a> {
    /// Per-row running maxima.
    pub m: &'a mut [f32],
    /// Per-row running sums of weights.
    pub l: &'a mut [f32],
    /// The rows' accumulators.
    pub acc: &'a mut [f32],
    /// The accumulators' row stride (a multiple of the lane count).
    pub stride: usize,
}

/// The online softmax over one block of `nb` keys from `j0` for every row of a tile:
/// row `r`'s scores are `scores[r · BLOCK ..][..nb]` (turned into weights in place), its
/// keys `row_keys[r]` (see [`softmax_step`]).
#[inline(always)]
pub(crate) fn softmax_block<S: Simd>(
    s: S,
    scores: &mut [f32],
    nb: usize,
    j0: usize,
    row_keys: &[Range<usize>],
    softcap: Option<f32>,
    running: Running<'_>,
) {
    let stride = running.stride;
    for (r, own) in row_keys.iter().enumerate() {
        softmax_step(
            s,
            &mut scores[r * BLOCK..r * BLOCK + nb],
            j0,
            own,
            softcap,
            (&mut running.m[r], &mut running.l[r]),
            &mut running.acc[r * stride..(r + 1) * stride],
        );
    }
}

/// One row's step of the online softmax over the block of keys `j0 .. j0 + sc.len()`:
/// soft-caps the row's scores `sc`, masks the keys outside `own` (the row's range),
/// turns the scores into weights `exp(x − m)` against the running maximum `m` (updated),
/// adds them to the running sum `l`, and rescales the row's accumulator `acc` to the new
/// maximum. A row that has seen no key yet gets zero weights.
#[inline(always)]
pub(crate) fn softmax_step<S: Simd>(
    s: S,
    sc: &mut [f32],
    j0: usize,
    own: &Range<usize>,
    softcap: Option<f32>,
    (m, l): (&mut f32, &mut f32),
    acc: &mut [f32],
) {
    let nb = sc.len();
    if let Some(cap) = softcap {
        soft_cap(s, sc, cap);
    }
    // Keys of the block outside this row's range (after the cap, which would turn -inf
    // into -cap) take no weight.
    if j0 < own.start || j0 + nb > own.end {
        for (jj, x) in sc.iter_mut().enumerate() {
            if !own.contains(&(j0 + jj)) {
                *x = f32::NEG_INFINITY;
            }
        }
    }
    let block_max = max_row(s, sc);
    let m_new = m.max(block_max);
    if m_new == f32::NEG_INFINITY {
        sc.fill(0.0);
        return;
    }
    let correction = if *m == f32::NEG_INFINITY {
        0.0
    } else {
        (*m - m_new).exp()
    };
    let sum = exp_shifted(s, sc, m_new);
    *l = *l * correction + sum;
    if correction != 1.0 {
        scale_row(s, acc, correction);
    }
    *m = m_new;
}

/// `out` row `r` (`dv` values) = accumulator row `r` (`acc[r·stride ..]`) divided by the
/// row's softmax sum `l[r]`; zeros for a row that saw no key.
pub(crate) fn normalize_rows(acc: &[f32], stride: usize, l: &[f32], dv: usize, out: &mut [f32]) {
    for (r, &lr) in l.iter().enumerate() {
        let inv = if lr > 0.0 { 1.0 / lr } else { 0.0 };
        let (src, dst) = (
            &acc[r * stride..r * stride + dv],
            &mut out[r * dv..(r + 1) * dv],
        );
        for (o, a) in dst.iter_mut().zip(src) {
            *o = a * inv;
        }
    }
}

/// Asks the cache for the rows `keys` of `data`: a head's rows are a few KiB apart in the
/// cache (one position's heads lie between) and the weights streamed since the last
/// step evicted them, so without it decode attention waited on DRAM per key (a large
/// share of a small model's decode step).
#[inline(always)]
fn prefetch_rows(data: KvData<'_>, rows: KvRows, keys: Range<usize>) {
    for j in keys {
        let start = rows.base + j * rows.stride;
        match data {
            KvData::F32(x) => prefetch_row(x, start, rows.dim),
            KvData::F16(x) => prefetch_row(x, start, rows.dim),
            KvData::Blocks(dtype, x) => {
                let bb = dtype.block_bytes();
                prefetch_row(x, start * bb, rows.dim / dtype.block_len() * bb);
            }
        }
    }
}

/// Asks for the lines of `data[start..start + len]`.
#[inline(always)]
fn prefetch_row<T>(data: &[T], start: usize, len: usize) {
    if len == 0 {
        return;
    }
    for e in (start..start + len).step_by((64 / size_of::<T>()).max(1)) {
        prefetch(data, e);
    }
    prefetch(data, start + len - 1);
}

/// Scores of `R` query rows (each `dp` values apart in `q`, zero padded) against one key
/// row: `scores[r·BLOCK] = q_r · krow`. Returns `R`.
#[inline(always)]
fn dots<S: Simd, K: Lane, const R: usize>(
    s: S,
    q: &[f32],
    dp: usize,
    krow: &[K],
    scores: &mut [f32],
) -> usize {
    let d = krow.len();
    assert!(
        d <= dp
            && dp.is_multiple_of(S::LANES)
            && q.len() >= R * dp
            && scores.len() > (R - 1) * BLOCK
    );
    let full = d - d % S::LANES;
    let (qp, kp) = (q.as_ptr(), krow.as_ptr());
    let mut acc = [s.splat(0.0); R];
    let mut c = 0;
    while c < full {
        // SAFETY: `c + LANES <= full <= d = krow.len()`, and for every row
        // `r·dp + c + LANES <= r·dp + d <= R·dp <= q.len()` (asserted above).
        let kv = unsafe { K::load_ptr(s, kp.add(c)) };
        for (r, a) in acc.iter_mut().enumerate() {
            // SAFETY: see above.
            *a = s.mul_add(unsafe { s.load_ptr(qp.add(r * dp + c)) }, kv, *a);
        }
        c += S::LANES;
    }
    if full < d {
        // The tail: K padded with zeros; q rows are zero padded up to `dp`, a multiple of
        // the lane count above `full`.
        let kv = K::load_partial(s, &krow[full..], 0.0);
        for (r, a) in acc.iter_mut().enumerate() {
            *a = s.mul_add(s.load(&q[r * dp + full..]), kv, *a);
        }
    }
    if R == 8 {
        let sums = s.reduce_add_x8(std::array::from_fn(|i| acc[i]));
        for (r, v) in sums.into_iter().enumerate() {
            scores[r * BLOCK] = v;
        }
    } else {
        for (r, a) in acc.iter().enumerate() {
            scores[r * BLOCK] = s.reduce_add(*a);
        }
    }
    R
}

/// One query row `q` (zero padded to a multiple of the lane count) against the eight key
/// rows of `d` values at `starts` (increasing) in `k`: `scores[t] = q · k_t`.
#[inline(always)]
fn dots_keys<S: Simd, K: Lane>(
    s: S,
    q: &[f32],
    k: &[K],
    starts: [usize; 8],
    d: usize,
    scores: &mut [f32],
) {
    assert!(
        starts.is_sorted()
            && starts[7] + d <= k.len()
            && d <= q.len()
            && q.len().is_multiple_of(S::LANES)
            && scores.len() >= 8
    );
    let full = d - d % S::LANES;
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    let mut acc = [s.splat(0.0); 8];
    let mut c = 0;
    while c < full {
        // SAFETY: `c + LANES <= full <= d <= q.len()`, and every key row's `starts[t] + c +
        // LANES <= starts[t] + d <= starts[7] + d <= k.len()` (asserted above).
        let qv = unsafe { s.load_ptr(qp.add(c)) };
        for (a, &st) in acc.iter_mut().zip(&starts) {
            // SAFETY: see above.
            *a = s.mul_add(qv, unsafe { K::load_ptr(s, kp.add(st + c)) }, *a);
        }
        c += S::LANES;
    }
    if full < d {
        // The tail: keys padded with zeros, q zero padded past `d`.
        let qv = s.load(&q[full..]);
        for (a, &st) in acc.iter_mut().zip(&starts) {
            *a = s.mul_add(qv, K::load_partial(s, &k[st + full..st + d], 0.0), *a);
        }
    }
    scores[..8].copy_from_slice(&s.reduce_add_x8(acc));
}

/// `acc_r += Σ_j p[r][j] · v_j` for `R` rows over the block's `nb` keys, several vectors
/// of `Dv` at a time with their accumulators in registers: fewer rows take more vectors
/// per pass (eight for one row, four for two or three, two for four to seven), so every
/// pass has at least eight independent sums (one row with one vector was a chain of
/// dependent FMAs, one per key). Returns `R`.
#[inline(always)]
fn accumulate<S: Simd, V: Lane, const R: usize>(
    s: S,
    p: &[f32],
    nb: usize,
    v: &[V],
    vr: KvRows,
    acc: &mut [f32],
    dvp: usize,
) -> usize {
    let dv = vr.dim;
    if nb == 0 {
        return R;
    }
    let full = dv - dv % S::LANES;
    let b = ValueBlock { p, nb, v, vr };
    let c = match R {
        1 => sum_passes::<S, V, R, 8>(s, &b, acc, dvp, 0, full),
        2 | 3 => sum_passes::<S, V, R, 4>(s, &b, acc, dvp, 0, full),
        4..8 => sum_passes::<S, V, R, 2>(s, &b, acc, dvp, 0, full),
        _ => 0,
    };
    sum_passes::<S, V, R, 1>(s, &b, acc, dvp, c, full);
    if full < dv {
        let mut regs = [s.splat(0.0); R];
        for (r, reg) in regs.iter_mut().enumerate() {
            *reg = s.load(&acc[r * dvp + full..]);
        }
        for jj in 0..nb {
            let start = vr.base + jj * vr.stride + full;
            let vv = V::load_partial(s, &v[start..start + dv - full], 0.0);
            for (r, reg) in regs.iter_mut().enumerate() {
                *reg = s.mul_add(s.splat(p[r * BLOCK + jj]), vv, *reg);
            }
        }
        for (r, reg) in regs.iter().enumerate() {
            s.store(&mut acc[r * dvp + full..], *reg);
        }
    }
    R
}

/// One block's weights and value rows, as [`accumulate`] reads them: row `r`'s weights
/// are `p[r · BLOCK ..][..nb]`, the values of the block's key `jj` row `jj` of `v` per
/// `vr` (whose row 0 is the block's first key).
struct ValueBlock<'a, V> {
    p: &'a [f32],
    nb: usize,
    v: &'a [V],
    vr: KvRows,
}

/// Passes of `C` whole vectors of `Dv` from offset `from` while they fit below `full`
/// (`R` rows, `R · C` accumulators in registers); returns where they stopped.
#[inline(always)]
fn sum_passes<S: Simd, V: Lane, const R: usize, const C: usize>(
    s: S,
    b: &ValueBlock<'_, V>,
    acc: &mut [f32],
    dvp: usize,
    from: usize,
    full: usize,
) -> usize {
    let (nb, vr) = (b.nb, b.vr);
    assert!(
        nb > 0
            && nb <= BLOCK
            && b.p.len() >= (R - 1) * BLOCK + nb
            && acc.len() >= R * dvp
            && full <= vr.dim
            && vr.dim <= dvp
    );
    // Every value row of the block lies inside `v`: rows are `stride` apart, so checking
    // the last one covers them all.
    let last = vr.base + (nb - 1) * vr.stride;
    assert!(last + vr.dim <= b.v.len());
    let (vp, pp) = (b.v.as_ptr(), b.p.as_ptr());
    let mut c = from;
    while c + C * S::LANES <= full {
        let mut regs = [[s.splat(0.0); C]; R];
        for (r, row) in regs.iter_mut().enumerate() {
            for (u, reg) in row.iter_mut().enumerate() {
                *reg = s.load(&acc[r * dvp + c + u * S::LANES..]);
            }
        }
        for jj in 0..nb {
            // SAFETY: row `jj` starts at or before `last`, and `c + C·LANES <= full
            // <= dv`, so the values read lie below `last + dv <= v.len()` (asserted above).
            let vv: [S::V; C] = std::array::from_fn(|u| unsafe {
                V::load_ptr(s, vp.add(vr.base + jj * vr.stride + c + u * S::LANES))
            });
            for (r, row) in regs.iter_mut().enumerate() {
                // SAFETY: `r·BLOCK + jj < (R - 1)·BLOCK + nb <= p.len()` (asserted above).
                let w = s.splat(unsafe { *pp.add(r * BLOCK + jj) });
                for (reg, &x) in row.iter_mut().zip(&vv) {
                    *reg = s.mul_add(w, x, *reg);
                }
            }
        }
        for (r, row) in regs.iter().enumerate() {
            for (u, reg) in row.iter().enumerate() {
                s.store(&mut acc[r * dvp + c + u * S::LANES..], *reg);
            }
        }
        c += C * S::LANES;
    }
    c
}

/// `x ← cap · tanh(x / cap)`.
#[inline(always)]
fn soft_cap<S: Simd>(s: S, x: &mut [f32], cap: f32) {
    let (vc, inv) = (s.splat(cap), s.splat(1.0 / cap));
    let mut chunks = x.chunks_exact_mut(S::LANES);
    for c in &mut chunks {
        let r = s.mul(vc, math::tanh(s, s.mul(s.load(c), inv)));
        s.store(c, r);
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let r = s.mul(vc, math::tanh(s, s.mul(s.load_partial(tail, 0.0), inv)));
        s.store_partial(tail, r);
    }
}

/// `x ← exp(x - m)`, returning the sum.
#[inline(always)]
fn exp_shifted<S: Simd>(s: S, x: &mut [f32], m: f32) -> f32 {
    let vm = s.splat(m);
    let mut sum = s.splat(0.0);
    let mut chunks = x.chunks_exact_mut(S::LANES);
    for c in &mut chunks {
        let e = math::exp(s, s.sub(s.load(c), vm));
        s.store(c, e);
        sum = s.add(sum, e);
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let e = math::exp(s, s.sub(s.load_partial(tail, f32::NEG_INFINITY), vm));
        s.store_partial(tail, e);
        sum = s.add(sum, e);
    }
    s.reduce_add(sum)
}

/// `x ← x · c` over a padded row.
#[inline(always)]
fn scale_row<S: Simd>(s: S, x: &mut [f32], c: f32) {
    let vc = s.splat(c);
    for chunk in x.chunks_exact_mut(S::LANES) {
        let r = s.mul(s.load(chunk), vc);
        s.store(chunk, r);
    }
}

simd_dispatch! {
    /// Attends one tile (see [`Tile`]; `staging` may be empty unless K or V is
    /// block-quantized, see [`staging_len`]).
    pub(crate) fn attend_tile_rows(
        tile: &Tile<'_>,
        k: KvData<'_>,
        kr: KvRows,
        v: KvData<'_>,
        vr: KvRows,
        scratch: &mut Scratch,
        staging: &mut [f32],
        out: &mut [f32],
    ) -> () = attend_tile;
}
