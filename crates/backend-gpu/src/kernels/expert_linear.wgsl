// expert_linear: out[r, n] = x[r] · w[ids[r], n] over the rows r = (t, s) of x [T, k, K],
// the rows grouped by expert first (expert_rows.wgsl: `grouping`), so that a workgroup
// takes a tile of up to four rows routed to one expert and dequantizes each weight value
// once for them, as `linear` does for its tiles (a bias is added by expert_bias.wgsl:
// four storage bindings is WebGPU's floor). One workgroup per (weight row of the window,
// tile): the 64 invocations split K. Experts [e0, e1) are bound (a window of the stack);
// the tiles of other experts wait for their window's dispatch. A row whose id no expert
// has gets NaN, never a read outside the stack.
// Params: 0 rows R, 1 N_win, 2 K, 3 w dtype, 4 w row stride (units), 5 w col stride (units,
// plain dtypes), 6 base of expert e0's row n0 (units; bytes for blocks), 7 block length,
// 8 block bytes, 12 out offset, 13 N, 14 n0, 15 x step, 16 expert stride (units), 17 e0,
// 18 e1, 19 tiles dispatched, 20 experts E, 24 x row layout.

@group(0) @binding(1) var<storage, read> el_x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> el_grouping: array<u32>;
@group(0) @binding(4) var<storage, read_write> el_out: array<f32>;

const EL_X_L: u32 = 24u;
const EL_WG: u32 = 64u;
const EL_TILE: u32 = 4u;

var<workgroup> el_partial: array<vec4<f32>, 64>;

fn expert_weight(e: u32, n: u32, k: u32) -> f32 {
    let dt = pu(3u);
    if (dt >= 10u) {
        let bl = pu(7u);
        let unit = e * pu(16u) + n * pu(4u) + k / bl;
        return w_dequant(dt, pu(6u) + unit * pu(8u), k % bl);
    }
    return load_w(pu(6u) + e * pu(16u) + n * pu(4u) + k * pu(5u), dt);
}

// The bucket whose tiles hold tile j: the last b in [0, E] with first tile ≤ j.
fn el_bucket(j: u32) -> u32 {
    var lo = 0u;
    var hi = pu(20u);
    while (lo < hi) {
        let mid = (lo + hi + 1u) / 2u;
        if (el_grouping[mid] <= j) { lo = mid; } else { hi = mid - 1u; }
    }
    return lo;
}

@compute @workgroup_size(64)
fn expert_linear(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wg, nwg);
    let n_win = pu(1u);
    if (g >= n_win * pu(19u)) { return; }
    let n = g % n_win;
    let j = g / n_win;
    let experts = pu(20u);
    let buckets = experts + 1u;
    if (j >= el_grouping[buckets]) { return; }
    let b = el_bucket(j);
    let row_starts = buckets + 1u;
    let list = 2u * (buckets + 1u);
    let first = el_grouping[row_starts + b] + (j - el_grouping[b]) * EL_TILE;
    let count = min(EL_TILE, el_grouping[row_starts + b + 1u] - first);
    let col = pu(14u) + n;
    if (b == experts) {
        if (lid < count) {
            let r = el_grouping[list + first + lid];
            el_out[pu(12u) + r * pu(13u) + col] = nan_f32();
        }
        return;
    }
    if (b < pu(17u) || b >= pu(18u)) { return; }
    let e_rel = b - pu(17u);
    var out_rows = vec4<u32>(0u);
    var x_rows = vec4<u32>(0u);
    for (var i = 0u; i < count; i++) {
        let r = el_grouping[list + first + i];
        out_rows[i] = r;
        x_rows[i] = strided(EL_X_L, r);
    }
    let k_len = pu(2u);
    let step = pu(15u);
    var acc = vec4<f32>(0.0);
    for (var k = lid; k < k_len; k += EL_WG) {
        let wv = expert_weight(e_rel, n, k);
        var xv = vec4<f32>(0.0);
        for (var i = 0u; i < count; i++) { xv[i] = el_x[x_rows[i] + k * step]; }
        acc += xv * wv;
    }
    el_partial[lid] = acc;
    workgroupBarrier();
    for (var half = EL_WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) { el_partial[lid] = el_partial[lid] + el_partial[lid + half]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let total = el_partial[0];
        for (var i = 0u; i < count; i++) {
            el_out[pu(12u) + out_rows[i] * pu(13u) + col] = total[i];
        }
    }
}
