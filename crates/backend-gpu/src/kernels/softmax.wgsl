// Softmax / log-softmax along the last dim: one workgroup per row.
// Params: 0 rows, 1 n, 2 log, 3 step, 4 out offset, 8 row layout.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const ROW_L: u32 = 8u;
const WG: u32 = 64u;

var<workgroup> red: array<f32, 64>;

fn reduce_max(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) { red[lid] = max(red[lid], red[lid + half]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) { red[lid] = red[lid] + red[lid + half]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn softmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = group_index(wg, nwg);
    if (row >= pu(0u)) { return; }
    let n = pu(1u);
    let step = pu(3u);
    let base = strided(ROW_L, row);
    var m = -inf_f32();
    for (var k = lid; k < n; k += WG) { m = max(m, x[base + k * step]); }
    m = reduce_max(lid, m);
    var s = 0.0;
    for (var k = lid; k < n; k += WG) { s += exp(x[base + k * step] - m); }
    s = reduce_sum(lid, s);
    let o = pu(4u) + row * n;
    let log_sum = log(s);
    for (var k = lid; k < n; k += WG) {
        let v = x[base + k * step] - m;
        out[o + k] = select(exp(v) / s, v - log_sum, pu(2u) == 1u);
    }
}
