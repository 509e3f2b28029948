// RMS norm and layer norm over the last dim: one workgroup per row. Weights and bias
// are f32, f16 or bf16 with their own offset and stride.
// Params: 0 rows, 1 n, 2 eps, 3 step, 4 w dtype, 5 w offset, 6 w stride, 7 has bias,
// 8 b dtype, 9 b offset, 10 b stride, 11 out offset, 12 row layout.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const ROW_L: u32 = 12u;
const WG: u32 = 64u;

var<workgroup> red: array<f32, 64>;

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

fn weight(i: u32) -> f32 { return load_w(pu(5u) + i * pu(6u), pu(4u)); }
fn offset_b(i: u32) -> f32 { return load_bias(pu(9u) + i * pu(10u), pu(8u)); }

@compute @workgroup_size(64)
fn rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = group_index(wg, nwg);
    if (row >= pu(0u)) { return; }
    let n = pu(1u);
    let step = pu(3u);
    let base = strided(ROW_L, row);
    var s = 0.0;
    for (var k = lid; k < n; k += WG) {
        let v = x[base + k * step];
        s += v * v;
    }
    s = reduce_sum(lid, s);
    let scale = 1.0 / sqrt(s / f32(n) + pf(2u));
    let o = pu(11u) + row * n;
    for (var k = lid; k < n; k += WG) {
        out[o + k] = x[base + k * step] * scale * weight(k);
    }
}

@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let row = group_index(wg, nwg);
    if (row >= pu(0u)) { return; }
    let n = pu(1u);
    let step = pu(3u);
    let base = strided(ROW_L, row);
    var s = 0.0;
    for (var k = lid; k < n; k += WG) { s += x[base + k * step]; }
    let mean = reduce_sum(lid, s) / f32(n);
    var v = 0.0;
    for (var k = lid; k < n; k += WG) {
        let d = x[base + k * step] - mean;
        v += d * d;
    }
    let scale = 1.0 / sqrt(reduce_sum(lid, v) / f32(n) + pf(2u));
    let o = pu(11u) + row * n;
    let has_bias = pu(7u) == 1u;
    for (var k = lid; k < n; k += WG) {
        var y = (x[base + k * step] - mean) * scale * weight(k);
        if (has_bias) { y += offset_b(k); }
        out[o + k] = y;
    }
}
