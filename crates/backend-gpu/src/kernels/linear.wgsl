// out[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n]) with weights dequantized in the shader
// (f32, f16, bf16, q4_0, q8_0, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4). One workgroup per (weight row, tile of
// four input rows): the 64 invocations split K, each weight value is dequantized once and
// used for the four rows. Dispatched once per window of weight rows [n0, n0 + N_win).
// Params: 0 M, 1 N_win, 2 K, 3 w dtype, 4 w row stride (units), 5 w col stride (units,
// plain dtypes), 6 base of row n0 (units; bytes for blocks), 7 block length, 8 block
// bytes, 9 has bias, 10 bias offset, 11 bias stride, 12 out offset, 13 N, 14 n0,
// 15 x step, 16 m tiles, 20 x row layout.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const X_L: u32 = 20u;
const WG: u32 = 64u;

var<workgroup> partial: array<vec4<f32>, 64>;

fn weight(n: u32, k: u32) -> f32 {
    let dt = pu(3u);
    if (dt >= 10u) {
        let bl = pu(7u);
        let unit = n * pu(4u) + k / bl;
        return w_dequant(dt, pu(6u) + unit * pu(8u), k % bl);
    }
    return load_w(pu(6u) + n * pu(4u) + k * pu(5u), dt);
}

@compute @workgroup_size(64)
fn linear(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wg, nwg);
    let n_win = pu(1u);
    if (g >= n_win * pu(16u)) { return; }
    let n = g % n_win;
    let m0 = (g / n_win) * 4u;
    let m_len = pu(0u);
    let k_len = pu(2u);
    let step = pu(15u);
    var rows = vec4<u32>(0u);
    var live = vec4<f32>(0.0);
    for (var r = 0u; r < 4u; r++) {
        if (m0 + r < m_len) {
            rows[r] = strided(X_L, m0 + r);
            live[r] = 1.0;
        }
    }
    var acc = vec4<f32>(0.0);
    for (var k = lid; k < k_len; k += WG) {
        let wv = weight(n, k);
        var xv = vec4<f32>(0.0);
        for (var r = 0u; r < 4u; r++) {
            if (live[r] != 0.0) { xv[r] = x[rows[r] + k * step]; }
        }
        acc += xv * wv;
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) { partial[lid] = partial[lid] + partial[lid + half]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let col = pu(14u) + n;
        var b = 0.0;
        if (pu(9u) == 1u) { b = bias[pu(10u) + col * pu(11u)]; }
        let total = partial[0];
        for (var r = 0u; r < 4u; r++) {
            if (m0 + r < m_len) {
                out[pu(12u) + (m0 + r) * pu(13u) + col] = total[r] + b;
            }
        }
    }
}
