// Reductions along one dim (sum, mean, max, min) and argmax: one workgroup per output
// element ("lane"); the lane's first input unit comes from the lane layout, its elements
// follow at `step`.
// Params: 0 lanes, 1 n (reduced dim), 2 op (0 sum, 1 mean, 2 max, 3 min), 3 step,
// 4 out offset, 8 lane layout.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const LANE_L: u32 = 8u;
const WG: u32 = 64u;

var<workgroup> vals: array<f32, 64>;
var<workgroup> idxs: array<u32, 64>;

fn combine(op: u32, a: f32, b: f32) -> f32 {
    if (op <= 1u) { return a + b; }
    if (is_nan(a) || is_nan(b)) { return nan_f32(); }
    return select(min(a, b), max(a, b), op == 2u);
}

@compute @workgroup_size(64)
fn reduce(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let lane = group_index(wg, nwg);
    if (lane >= pu(0u)) { return; }
    let n = pu(1u);
    let op = pu(2u);
    let step = pu(3u);
    let base = strided(LANE_L, lane);
    var acc = select(select(inf_f32(), -inf_f32(), op == 2u), 0.0, op <= 1u);
    for (var k = lid; k < n; k += WG) {
        acc = combine(op, acc, x[base + k * step]);
    }
    vals[lid] = acc;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) {
            vals[lid] = combine(op, vals[lid], vals[lid + half]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        var r = vals[0];
        if (op == 1u) {
            r = select(r / f32(n), nan_f32(), n == 0u);
        }
        out[pu(4u) + lane] = bitcast<u32>(r);
    }
}

// Whether candidate (va, ia) beats (vb, ib): NaN counts as the maximum, ties go to the
// lower index.
fn better(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    let na = is_nan(va);
    let nb = is_nan(vb);
    if (na || nb) {
        return na && (!nb || ia < ib);
    }
    return va > vb || (va == vb && ia < ib);
}

@compute @workgroup_size(64)
fn argmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let lane = group_index(wg, nwg);
    if (lane >= pu(0u)) { return; }
    let n = pu(1u);
    let step = pu(3u);
    let base = strided(LANE_L, lane);
    var best = -inf_f32();
    var best_i = 0xffffffffu;
    for (var k = lid; k < n; k += WG) {
        let v = x[base + k * step];
        if (best_i == 0xffffffffu || better(v, k, best, best_i)) {
            best = v;
            best_i = k;
        }
    }
    vals[lid] = best;
    idxs[lid] = best_i;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) {
            let oi = idxs[lid + half];
            if (oi != 0xffffffffu && (idxs[lid] == 0xffffffffu || better(vals[lid + half], oi, vals[lid], idxs[lid]))) {
                vals[lid] = vals[lid + half];
                idxs[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[pu(4u) + lane] = idxs[0];
    }
}
