//! The rows of one `expert_linear` call grouped by expert: a stable counting sort of the
//! `(token, slot)` pairs by their expert id, so each chosen expert's weights meet all of
//! its rows at once (read once per call) and its rows keep their row-major order.

use tempra_pool::{HostLease, HostPool};
use tempra_tensor::{Result, StridedIndex, Tensor, TensorError};

/// The pairs of each expert, in one pool lease of u32s laid out as `[starts (E + 1) |
/// order (pairs) | active (E)]`: expert `e`'s pairs are `order[starts[e]..starts[e + 1]]`
/// (each pair `t · slots + s`, ascending), `active` lists the experts that have any.
pub(crate) struct Routing {
    lease: HostLease,
    experts: usize,
    pairs: usize,
    active: usize,
}

impl Routing {
    /// Groups the pairs of U32 `ids [T, slots]` (host memory, any strides) by expert; an
    /// id ≥ `experts` is an error naming its token and slot.
    pub(crate) fn new(
        pool: &HostPool,
        op: &'static str,
        ids: &Tensor,
        experts: usize,
    ) -> Result<Self> {
        let pairs = ids.elem_count();
        let slots = ids.dims()[1].max(1);
        let mut lease = pool
            .acquire((2 * experts + 1 + pairs) * size_of::<u32>())
            .map_err(|source| TensorError::Pool { op, source })?;
        let words = &mut lease.as_mut_slice::<u32>()[..2 * experts + 1 + pairs];
        let (starts, rest) = words.split_at_mut(experts + 1);
        let (order, cursor) = rest.split_at_mut(pairs);
        let bytes = ids.storage().host_bytes()?;
        let id_at =
            |unit: usize| -> u32 { bytemuck::pod_read_unaligned(&bytes[unit * 4..unit * 4 + 4]) };
        starts.fill(0);
        for (pair, unit) in StridedIndex::new(ids.layout()).enumerate() {
            let e = id_at(unit) as usize;
            if e >= experts {
                return Err(TensorError::Argument {
                    op,
                    name: "ids",
                    reason: format!(
                        "expert {e} of token {}, slot {} is out of range for {experts} experts",
                        pair / slots,
                        pair % slots
                    ),
                });
            }
            starts[e + 1] += 1;
        }
        for e in 0..experts {
            starts[e + 1] += starts[e];
        }
        cursor.copy_from_slice(&starts[..experts]);
        for (pair, unit) in StridedIndex::new(ids.layout()).enumerate() {
            let e = id_at(unit) as usize;
            order[cursor[e] as usize] = pair as u32;
            cursor[e] += 1;
        }
        // The cursors are spent: the area now lists the active experts.
        let mut active = 0;
        for e in 0..experts {
            if starts[e + 1] > starts[e] {
                cursor[active] = e as u32;
                active += 1;
            }
        }
        Ok(Routing {
            lease,
            experts,
            pairs,
            active,
        })
    }

    fn words(&self) -> &[u32] {
        &self.lease.as_slice::<u32>()[..2 * self.experts + 1 + self.pairs]
    }

    /// Where expert `e`'s pairs start in the sorted order.
    pub(crate) fn start(&self, e: usize) -> usize {
        self.words()[e] as usize
    }

    /// Expert `e`'s pairs, ascending.
    pub(crate) fn rows(&self, e: usize) -> &[u32] {
        let w = self.words();
        &w[self.experts + 1 + w[e] as usize..self.experts + 1 + w[e + 1] as usize]
    }

    /// Every pair, expert after expert.
    pub(crate) fn order(&self) -> &[u32] {
        &self.words()[self.experts + 1..self.experts + 1 + self.pairs]
    }

    /// The experts with at least one pair, ascending.
    pub(crate) fn active(&self) -> &[u32] {
        let at = self.experts + 1 + self.pairs;
        &self.words()[at..at + self.active]
    }

    /// The most pairs any expert has.
    pub(crate) fn max_rows(&self) -> usize {
        self.active()
            .iter()
            .map(|&e| self.rows(e as usize).len())
            .max()
            .unwrap_or(0)
    }
}
