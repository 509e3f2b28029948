// expert_rows: the rows r of ids [R] (any strides) grouped by expert into `grouping`, for
// expert_linear's tiles. Buckets b = 0..B (B = E + 1: the experts, then every id no
// expert has). Layout of `grouping` (u32): [0, B] the first tile of each bucket (tiles of
// T rows, a bucket's rows in ceil(count / T) tiles; entry B is the total), [B + 1, 2B + 1]
// the first row of each bucket in the list, then the list: the rows, bucket by bucket, in
// row order within a bucket. One workgroup: each invocation counts (then lists) the
// buckets b ≡ lid (mod 256) with a pass over the ids; invocation 0 turns the counts into
// starts between the two passes.
// Params: 0 rows R, 1 experts E, 2 rows per tile T, 8 ids layout.

@group(0) @binding(1) var<storage, read> er_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> grouping: array<u32>;

const ER_IDS_L: u32 = 8u;
const ER_WG: u32 = 256u;

fn er_bucket(r: u32) -> u32 {
    return min(er_ids[strided(ER_IDS_L, r)], pu(1u));
}

@compute @workgroup_size(256)
fn expert_rows(@builtin(local_invocation_index) lid: u32) {
    let rows = pu(0u);
    let buckets = pu(1u) + 1u;
    let tile = pu(2u);
    let row_starts = buckets + 1u;
    let list = 2u * (buckets + 1u);
    // Each bucket's count, in the slot of the next bucket's row start.
    for (var b = lid; b < buckets; b += ER_WG) {
        var count = 0u;
        for (var r = 0u; r < rows; r++) {
            if (er_bucket(r) == b) { count += 1u; }
        }
        grouping[row_starts + b + 1u] = count;
    }
    storageBarrier();
    workgroupBarrier();
    if (lid == 0u) {
        grouping[0] = 0u;
        grouping[row_starts] = 0u;
        var first_row = 0u;
        var first_tile = 0u;
        for (var b = 0u; b < buckets; b++) {
            let count = grouping[row_starts + b + 1u];
            first_row += count;
            first_tile += (count + tile - 1u) / tile;
            grouping[row_starts + b + 1u] = first_row;
            grouping[b + 1u] = first_tile;
        }
    }
    storageBarrier();
    workgroupBarrier();
    for (var b = lid; b < buckets; b += ER_WG) {
        var at = list + grouping[row_starts + b];
        for (var r = 0u; r < rows; r++) {
            if (er_bucket(r) == b) {
                grouping[at] = r;
                at += 1u;
            }
        }
    }
}
