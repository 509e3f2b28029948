//! Property tests for `Layout` views: random chains of view ops checked against a naive
//! reference that materialises, for every logical element, where it lives in storage.
//!
//! The reference holds one id per logical element in row-major order: `unit * block_len +
//! position in block` (the plain storage offset for plain dtypes). Each op is applied to it
//! index by index (gather), with no stride arithmetic at all.

use proptest::prelude::*;
use tempra_tensor::{DType, Layout, MAX_RANK, Shape, TensorError};

/// Upper bound on elements a chain may grow to by broadcasting (keeps cases fast).
const MAX_ELEMS: usize = 4096;

#[derive(Clone, Debug)]
enum Op {
    Narrow(usize, usize, usize),
    Permute(u64),
    Transpose(usize, usize),
    Reshape(u64),
    BroadcastTo(u64),
    Unsqueeze(usize),
    Squeeze(usize),
    Select(usize, usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let u = || 0usize..1000;
    prop_oneof![
        (u(), u(), u()).prop_map(|(a, b, c)| Op::Narrow(a, b, c)),
        any::<u64>().prop_map(Op::Permute),
        (u(), u()).prop_map(|(a, b)| Op::Transpose(a, b)),
        any::<u64>().prop_map(Op::Reshape),
        any::<u64>().prop_map(Op::Reshape),
        any::<u64>().prop_map(Op::BroadcastTo),
        u().prop_map(Op::Unsqueeze),
        u().prop_map(Op::Squeeze),
        (u(), u()).prop_map(|(a, b)| Op::Select(a, b)),
    ]
}

/// A tiny deterministic generator for op parameters derived from a seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if n == 0 { 0 } else { (z % n as u64) as usize }
    }
}

fn shape(dims: &[usize]) -> Shape {
    Shape::new(dims).unwrap()
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
    idx
}

fn count(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The reference: dims and the storage id of every logical element, row-major.
#[derive(Clone, Debug)]
struct Ref {
    dims: Vec<usize>,
    ids: Vec<usize>,
}

impl Ref {
    /// A new reference of shape `dims` whose element at `new index` is this one's element
    /// at `map(new index)`.
    fn gather(&self, dims: Vec<usize>, map: impl Fn(&[usize]) -> Vec<usize>) -> Ref {
        let ids = (0..count(&dims))
            .map(|flat| {
                let old = map(&unravel(flat, &dims));
                let old_flat = old
                    .iter()
                    .zip(&self.dims)
                    .fold(0, |acc, (&i, &d)| acc * d + i);
                self.ids[old_flat]
            })
            .collect();
        Ref { dims, ids }
    }

    /// The unit-level view: dims with the last divided by `bl`, and the unit of each
    /// unit (one per block: the element at position 0 of it).
    fn units(&self, bl: usize) -> (Vec<usize>, Vec<usize>) {
        let mut dims = self.dims.clone();
        if let Some(last) = dims.last_mut() {
            *last /= bl;
        }
        let last = self.dims.last().copied().unwrap_or(1);
        let ids = self
            .ids
            .iter()
            .enumerate()
            .filter(|(flat, _)| flat % last % bl == 0)
            .map(|(_, &id)| id / bl)
            .collect();
        (dims, ids)
    }
}

/// Whether unit ids in row-major order over `dims` can be written as
/// `ids[0] + Σ idx_d * stride_d` for some non-negative strides (i.e. a view exists); for a
/// block dtype (`block`), the last dim must also have stride 1 when it has several units.
fn strided_view_exists(dims: &[usize], ids: &[usize], block: bool) -> bool {
    if ids.is_empty() {
        return true;
    }
    if block && dims.last().is_some_and(|&d| d > 1) && ids[1] != ids[0] + 1 {
        return false;
    }
    let mut strides = vec![0usize; dims.len()];
    let mut step = 1;
    for d in (0..dims.len()).rev() {
        if dims[d] > 1 {
            match ids[step].checked_sub(ids[0]) {
                Some(s) => strides[d] = s,
                None => return false,
            }
        }
        step *= dims[d];
    }
    // Checked: a candidate stride can be huge (a layout with a stride near
    // `usize::MAX / 3`), and an overflowing candidate is simply not a view.
    (0..ids.len()).all(|flat| {
        let idx = unravel(flat, dims);
        let at = idx
            .iter()
            .zip(&strides)
            .try_fold(ids[0], |acc, (i, s)| acc.checked_add(i.checked_mul(*s)?));
        at == Some(ids[flat])
    })
}

/// A random shape with `n` elements (unit-level when `bl > 1`: the last dim is then
/// multiplied by `bl`), between 1 and `MAX_RANK` dims, factors in random order.
fn random_shape(n: usize, bl: usize, rng: &mut Rng) -> Vec<usize> {
    let units = n / bl;
    let mut factors = Vec::new();
    let mut m = units;
    let mut p = 2;
    while m > 1 {
        while m.is_multiple_of(p) {
            factors.push(p);
            m /= p;
        }
        p += 1;
    }
    // Mostly keep factor order (more views), sometimes shuffle (more errors).
    if rng.below(3) == 0 {
        for i in (1..factors.len()).rev() {
            factors.swap(i, rng.below(i + 1));
        }
    }
    let mut dims: Vec<usize> = Vec::new();
    for f in factors {
        let full = dims.len() == MAX_RANK;
        match dims.last_mut() {
            Some(last) if full || rng.below(2) == 0 => *last *= f,
            _ => dims.push(f),
        }
    }
    if units == 0 {
        dims = vec![0];
    }
    while dims.len() < MAX_RANK && rng.below(3) == 0 {
        let at = rng.below(dims.len() + 1);
        dims.insert(at, 1);
    }
    if dims.is_empty() && bl > 1 {
        dims.push(1);
    }
    if let Some(last) = dims.last_mut() {
        *last *= bl;
    }
    dims
}

/// Applies `op` to both the layout and the reference, checking errors where the op is
/// invalid; returns the new pair (unchanged when the op is skipped or rejected).
fn apply(layout: Layout, r: &Ref, op: &Op) -> (Layout, Ref) {
    let bl = layout.dtype().block_len();
    let block = bl > 1;
    let rank = r.dims.len();
    let last = rank.wrapping_sub(1);
    let unchanged = (layout, r.clone());
    match *op {
        Op::Narrow(a, b, c) => {
            if rank == 0 {
                assert!(matches!(
                    layout.narrow(0, 0, 0),
                    Err(TensorError::DimOutOfRange { .. })
                ));
                return unchanged;
            }
            let dim = a % rank;
            let size = r.dims[dim];
            let g = if block && dim == last { bl } else { 1 };
            let units = size / g;
            if units == 0 {
                return unchanged;
            }
            let start_u = b % units;
            let len_u = 1 + c % (units - start_u);
            if block && dim == last && c % 4 == 0 {
                let e = layout.narrow(dim, start_u * bl + 1, bl - 1).unwrap_err();
                assert!(matches!(e, TensorError::View { op: "narrow", .. }), "{e}");
            }
            let err = layout
                .narrow(dim, start_u * g, size - start_u * g + 1)
                .unwrap_err();
            assert!(matches!(err, TensorError::OutOfBounds { .. }), "{err}");
            let (start, len) = (start_u * g, len_u * g);
            let l = layout.narrow(dim, start, len).unwrap();
            let mut dims = r.dims.clone();
            dims[dim] = len;
            let nr = r.gather(dims, |idx| {
                let mut old = idx.to_vec();
                old[dim] += start;
                old
            });
            (l, nr)
        }
        Op::Permute(seed) => {
            let mut rng = Rng(seed);
            let mut perm: Vec<usize> = (0..rank).collect();
            let movable = if block && rng.below(4) != 0 {
                rank.saturating_sub(1)
            } else {
                rank
            };
            for i in (1..movable).rev() {
                perm.swap(i, rng.below(i + 1));
            }
            let res = layout.permute(&perm);
            if block && perm[last] != last {
                assert!(matches!(res, Err(TensorError::View { op: "permute", .. })));
                return unchanged;
            }
            let l = res.unwrap();
            let dims = perm.iter().map(|&p| r.dims[p]).collect();
            let nr = r.gather(dims, |idx| {
                let mut old = vec![0; rank];
                for (i, &p) in perm.iter().enumerate() {
                    old[p] = idx[i];
                }
                old
            });
            (l, nr)
        }
        Op::Transpose(a, b) => {
            if rank == 0 {
                return unchanged;
            }
            let (d0, d1) = (a % rank, b % rank);
            let res = layout.transpose(d0, d1);
            if block && d0 != d1 && (d0 == last || d1 == last) {
                assert!(matches!(
                    res,
                    Err(TensorError::View {
                        op: "transpose",
                        ..
                    })
                ));
                return unchanged;
            }
            let l = res.unwrap();
            let mut dims = r.dims.clone();
            dims.swap(d0, d1);
            let nr = r.gather(dims, |idx| {
                let mut old = idx.to_vec();
                old.swap(d0, d1);
                old
            });
            (l, nr)
        }
        Op::Reshape(seed) => {
            let n = r.ids.len();
            let dims = random_shape(n, bl, &mut Rng(seed));
            assert_eq!(count(&dims), n, "{dims:?}");
            let nr = Ref {
                dims: dims.clone(),
                ids: r.ids.clone(),
            };
            let (udims, uids) = nr.units(bl);
            let expressible = strided_view_exists(&udims, &uids, block);
            match layout.reshape(shape(&dims)) {
                Ok(l) => (l, nr),
                Err(e) => {
                    assert!(matches!(e, TensorError::View { op: "reshape", .. }), "{e}");
                    assert!(!layout.is_contiguous(), "contiguous layouts always reshape");
                    assert!(
                        !expressible,
                        "{layout:?} -> {dims:?}: a view exists but was refused"
                    );
                    // The element count check comes first.
                    let mut wrong = dims.clone();
                    wrong.push(2);
                    if wrong.len() <= MAX_RANK && n > 0 {
                        let e = layout.reshape(shape(&wrong)).unwrap_err();
                        assert!(matches!(e, TensorError::ShapeMismatch { .. }), "{e}");
                    }
                    unchanged
                }
            }
        }
        Op::BroadcastTo(seed) => {
            let mut rng = Rng(seed);
            let lead = if rank < MAX_RANK {
                rng.below(MAX_RANK - rank + 1).min(2)
            } else {
                0
            };
            let mut dims: Vec<usize> = (0..lead).map(|_| 1 + rng.below(3)).collect();
            for &d in &r.dims {
                dims.push(if d == 1 && rng.below(2) == 0 {
                    1 + rng.below(3)
                } else {
                    d
                });
            }
            if count(&dims) > MAX_ELEMS {
                return unchanged;
            }
            // Sometimes a bad target: a dim that is neither equal nor from 1.
            if let Some(d) = (0..rank).find(|&d| r.dims[d] > 1)
                && rng.below(4) == 0
            {
                let mut bad = dims.clone();
                bad[lead + d] += 1;
                let e = layout.broadcast_to(shape(&bad)).unwrap_err();
                assert!(matches!(e, TensorError::Broadcast { .. }), "{e}");
            }
            let l = layout.broadcast_to(shape(&dims)).unwrap();
            let odims = r.dims.clone();
            let nr = r.gather(dims, |idx| {
                idx[lead..]
                    .iter()
                    .zip(&odims)
                    .map(|(&i, &d)| if d == 1 { 0 } else { i })
                    .collect()
            });
            (l, nr)
        }
        Op::Unsqueeze(a) => {
            let dim = a % (rank + 1);
            let res = layout.unsqueeze(dim);
            if rank == MAX_RANK {
                assert!(matches!(
                    res,
                    Err(TensorError::Rank {
                        op: "unsqueeze",
                        ..
                    })
                ));
                return unchanged;
            }
            if block && dim == rank {
                assert!(matches!(
                    res,
                    Err(TensorError::View {
                        op: "unsqueeze",
                        ..
                    })
                ));
                return unchanged;
            }
            let mut dims = r.dims.clone();
            dims.insert(dim, 1);
            (
                res.unwrap(),
                Ref {
                    dims,
                    ids: r.ids.clone(),
                },
            )
        }
        Op::Squeeze(a) => {
            if rank == 0 {
                return unchanged;
            }
            // Prefer a size-1 dim when there is one.
            let ones: Vec<usize> = (0..rank).filter(|&d| r.dims[d] == 1).collect();
            let dim = if a % 2 == 0 && !ones.is_empty() {
                ones[a / 2 % ones.len()]
            } else {
                a % rank
            };
            let res = layout.squeeze(dim);
            if (block && dim == last) || r.dims[dim] != 1 {
                assert!(matches!(res, Err(TensorError::View { op: "squeeze", .. })));
                return unchanged;
            }
            let mut dims = r.dims.clone();
            dims.remove(dim);
            (
                res.unwrap(),
                Ref {
                    dims,
                    ids: r.ids.clone(),
                },
            )
        }
        Op::Select(a, b) => {
            if rank == 0 {
                return unchanged;
            }
            let dim = a % rank;
            let size = r.dims[dim];
            let e = layout.select(dim, size).unwrap_err();
            assert!(
                matches!(
                    e,
                    TensorError::OutOfBounds { .. } | TensorError::View { .. }
                ),
                "{e}"
            );
            if block && dim == last {
                assert!(matches!(
                    layout.select(dim, 0),
                    Err(TensorError::View { op: "select", .. })
                ));
                return unchanged;
            }
            if size == 0 {
                return unchanged;
            }
            let index = b % size;
            let l = layout.select(dim, index).unwrap();
            let mut dims = r.dims.clone();
            dims.remove(dim);
            let nr = r.gather(dims, |idx| {
                let mut old = idx.to_vec();
                old.insert(dim, index);
                old
            });
            (l, nr)
        }
    }
}

/// Everything the layout reports agrees with the reference.
fn check(layout: &Layout, r: &Ref) {
    let bl = layout.dtype().block_len();
    assert_eq!(layout.dims(), &r.dims[..], "{layout:?}");
    assert_eq!(layout.strides().len(), r.dims.len());
    assert_eq!(layout.elem_count(), r.ids.len());
    let rank = r.dims.len();
    for (flat, &id) in r.ids.iter().enumerate() {
        let idx = unravel(flat, &r.dims);
        let pos = if rank == 0 { 0 } else { idx[rank - 1] % bl };
        let unit = layout.index_to_offset(&idx).unwrap();
        assert_eq!(unit * bl + pos, id, "{layout:?} at {idx:?}");
    }
    // Out-of-range indices are errors, not panics.
    if rank > 0 {
        let mut bad = vec![0; rank];
        bad[0] = r.dims[0];
        assert!(layout.index_to_offset(&bad).is_err());
    }

    let (udims, uids) = r.units(bl);
    assert_eq!(layout.unit_shape().dims(), &udims[..]);
    assert_eq!(layout.unit_count(), uids.len());
    let strided: Vec<usize> = layout.strided_index().collect();
    assert_eq!(strided, uids, "strided_index of {layout:?}");
    assert_eq!(layout.strided_index().len(), uids.len());

    let runs = layout.runs();
    let run_len = runs.run_len();
    assert_eq!(runs.len() * run_len, uids.len());
    let mut from_runs = Vec::new();
    for (start, len) in layout.runs() {
        assert_eq!(len, run_len);
        from_runs.extend(start..start + len);
    }
    assert_eq!(from_runs, uids, "runs of {layout:?}");

    let dense = uids.windows(2).all(|w| w[1] == w[0] + 1);
    assert_eq!(layout.is_contiguous(), dense, "{layout:?}");
    if dense && !uids.is_empty() {
        assert_eq!(layout.runs().len(), 1);
        assert_eq!(
            layout.contiguous_range(),
            Some(uids[0]..uids[0] + uids.len())
        );
    }
    if !dense {
        assert_eq!(layout.contiguous_range(), None);
    }
    let spanned = uids.iter().max().map_or(0, |m| m + 1);
    assert_eq!(layout.units_spanned(), spanned);
    assert_eq!(
        layout.bytes_spanned(),
        spanned.saturating_mul(layout.dtype().block_bytes())
    );
    let _ = (layout.to_string(), format!("{layout:?}"));
}

fn run_chain(layout: Layout, ops: &[Op]) {
    let bl = layout.dtype().block_len();
    let n = layout.elem_count();
    let base = layout.offset() * bl;
    let mut r = Ref {
        dims: layout.dims().to_vec(),
        ids: (base..base + n).collect(),
    };
    let mut l = layout;
    check(&l, &r);
    for op in ops {
        (l, r) = apply(l, &r, op);
        check(&l, &r);
    }
}

fn dims_strategy(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..=max_dim, 1..=max_rank)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plain_view_chains_match_reference(
        dims in dims_strategy(4, 5),
        offset in 0usize..8,
        dtype in prop::sample::select(vec![DType::F32, DType::F16, DType::U8]),
        ops in prop::collection::vec(op_strategy(), 0..10),
    ) {
        let strides: Vec<usize> = {
            let c = Layout::contiguous(shape(&dims), dtype).unwrap();
            c.strides().to_vec()
        };
        let layout = Layout::from_parts(shape(&dims), &strides, offset, dtype).unwrap();
        run_chain(layout, &ops);
    }

    #[test]
    fn block_view_chains_match_reference(
        mut dims in dims_strategy(3, 4),
        blocks in 1usize..=3,
        offset in 0usize..4,
        ops in prop::collection::vec(op_strategy(), 0..10),
    ) {
        *dims.last_mut().unwrap() = blocks * 32;
        let c = Layout::contiguous(shape(&dims), DType::Q4_0).unwrap();
        let layout = Layout::from_parts(shape(&dims), c.strides(), offset, DType::Q4_0).unwrap();
        run_chain(layout, &ops);
    }

    #[test]
    fn arbitrary_from_parts_never_panics(
        dims in prop::collection::vec(0usize..6, 0..=MAX_RANK),
        strides in prop::collection::vec(prop_oneof![0usize..8, Just(usize::MAX / 3)], 0..=MAX_RANK),
        offset in prop_oneof![0usize..8, Just(usize::MAX - 2)],
        ops in prop::collection::vec(op_strategy(), 0..6),
    ) {
        // Whatever the parts, construction either fails cleanly or yields a layout whose
        // views keep the reference mapping.
        if let Ok(layout) = Layout::from_parts(shape(&dims), &strides, offset, DType::F32)
            && layout.elem_count() <= MAX_ELEMS
        {
            let ids = (0..layout.elem_count())
                .map(|flat| layout.index_to_offset(&unravel(flat, &dims)).unwrap())
                .collect();
            let mut r = Ref { dims: dims.clone(), ids };
            let mut l = layout;
            check(&l, &r);
            for op in &ops {
                (l, r) = apply(l, &r, op);
                check(&l, &r);
            }
        }
    }
}

#[test]
fn broadcast_shapes_is_symmetric_and_agrees_with_broadcast_to() {
    let shapes: [&[usize]; 7] = [&[], &[1], &[3], &[2, 1], &[1, 3], &[2, 3], &[4, 1, 3]];
    for a in shapes {
        for b in shapes {
            let (sa, sb) = (shape(a), shape(b));
            let ab = tempra_tensor::broadcast_shapes("t", &sa, &sb);
            let ba = tempra_tensor::broadcast_shapes("t", &sb, &sa);
            assert_eq!(ab.is_ok(), ba.is_ok(), "{a:?} {b:?}");
            if let (Ok(x), Ok(y)) = (ab, ba) {
                assert_eq!(x, y);
                let la = Layout::contiguous(sa, DType::F32).unwrap();
                assert_eq!(la.broadcast_to(x).unwrap().dims(), x.dims());
            }
        }
    }
}

#[test]
fn layout_formatting_snapshots() {
    let mut out = String::new();
    let c = Layout::contiguous(shape(&[2, 3]), DType::F32).unwrap();
    let q = Layout::contiguous(shape(&[4, 128]), DType::Q4_0).unwrap();
    let views = [
        ("contiguous f32 [2, 3]", c),
        ("transpose(0, 1)", c.transpose(0, 1).unwrap()),
        ("narrow(1, 1, 2)", c.narrow(1, 1, 2).unwrap()),
        (
            "broadcast_to [4, 2, 3]",
            c.broadcast_to(shape(&[4, 2, 3])).unwrap(),
        ),
        ("select(0, 1)", c.select(0, 1).unwrap()),
        (
            "scalar f16",
            Layout::contiguous(Shape::SCALAR, DType::F16).unwrap(),
        ),
        ("q4_0 [4, 128]", q),
        ("q6_K [3, 512] narrow(1, 256, 256)", {
            let k = Layout::contiguous(shape(&[3, 512]), DType::Q6K).unwrap();
            k.narrow(1, 256, 256).unwrap()
        }),
        (
            "q4_0 [4, 128] narrow(1, 32, 64)",
            q.narrow(1, 32, 64).unwrap(),
        ),
        (
            "q4_0 [4, 128] reshape [2, 2, 4, 32]",
            q.reshape(shape(&[2, 2, 4, 32])).unwrap(),
        ),
    ];
    for (what, l) in views {
        out.push_str(&format!("{what}\n  display: {l}\n  debug:   {l:?}\n"));
    }
    let errors = [
        c.narrow(1, 2, 2).unwrap_err(),
        q.narrow(1, 16, 32).unwrap_err(),
        q.transpose(0, 1).unwrap_err(),
        c.transpose(0, 1).unwrap().reshape(shape(&[6])).unwrap_err(),
        c.reshape(shape(&[5])).unwrap_err(),
        c.broadcast_to(shape(&[3, 3])).unwrap_err(),
        c.squeeze(0).unwrap_err(),
        c.permute(&[0, 0]).unwrap_err(),
        c.select(2, 0).unwrap_err(),
    ];
    out.push_str("errors\n");
    for e in errors {
        out.push_str(&format!("  {e}\n"));
    }
    insta::assert_snapshot!("layout_formatting", out);
}
