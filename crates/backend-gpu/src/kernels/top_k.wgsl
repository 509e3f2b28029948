// top_k: one invocation per row of x [R, N].
// Params: 0 rows, 1 n, 2 k, 3 step, 4 values offset, 5 indices offset, 8 row layout.

@group(0) @binding(1) var<storage, read> tk_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> tk_values: array<f32>;
@group(0) @binding(3) var<storage, read_write> tk_indices: array<u32>;

const TK_ROW_L: u32 = 8u;

// Whether (va, ia) ranks above (vb, ib): descending, NaN above every number, equal values
// (and two NaNs) by the lower index (tempra_tensor::ordering::ranks_above).
fn ranks_above(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    let na = is_nan(va);
    let nb = is_nan(vb);
    if (na && nb) { return ia < ib; }
    if (na || nb) { return na; }
    return va > vb || (va == vb && ia < ib);
}

@compute @workgroup_size(64)
fn top_k(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let row = group_index(wg, nwg) * 64u + lid;
    if (row >= pu(0u)) { return; }
    let n = pu(1u);
    let k = pu(2u);
    let step = pu(3u);
    let base = strided(TK_ROW_L, row);
    // The s-th pick is the best element ranking below pick s − 1 (a strict total order
    // on (value, index), so no element is picked twice).
    var prev_v = 0.0;
    var prev_i = 0xffffffffu;
    for (var s = 0u; s < k; s++) {
        var best_v = 0.0;
        var best_i = 0xffffffffu;
        for (var j = 0u; j < n; j++) {
            let v = tk_x[base + j * step];
            let below = prev_i == 0xffffffffu || ranks_above(prev_v, prev_i, v, j);
            if (below && (best_i == 0xffffffffu || ranks_above(v, j, best_v, best_i))) {
                best_v = v;
                best_i = j;
            }
        }
        tk_values[pu(4u) + row * k + s] = best_v;
        tk_indices[pu(5u) + row * k + s] = best_i;
        prev_v = best_v;
        prev_i = best_i;
    }
}

