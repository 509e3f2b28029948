// expert_linear: out[r, n] = x[r] · w[ids[r], n] over the rows r = (t, s) of x [T, k, K]
// (a bias is added by expert_bias.wgsl: four storage bindings is WebGPU's floor). One workgroup per (weight row of the window, input row): the
// 64 invocations split K as `linear` does. Experts [e0, e1) are bound (a window of the
// stack); rows routed elsewhere wait for their window's dispatch.
// Params: 0 rows R, 1 N_win, 2 K, 3 w dtype, 4 w row stride (units), 5 w col stride (units,
// plain dtypes), 6 base of expert e0's row n0 (units; bytes for blocks), 7 block length,
// 8 block bytes, 12 out offset, 13 N, 14 n0, 15 x step, 16 expert stride (units), 17 e0,
// 18 e1, 20 experts E, 24 x row layout, 38 ids layout.

@group(0) @binding(1) var<storage, read> el_x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> el_ids: array<u32>;
@group(0) @binding(4) var<storage, read_write> el_out: array<f32>;

const EL_X_L: u32 = 24u;
const EL_IDS_L: u32 = 38u;
const EL_WG: u32 = 64u;

var<workgroup> el_partial: array<f32, 64>;

fn expert_weight(e: u32, n: u32, k: u32) -> f32 {
    let dt = pu(3u);
    if (dt >= 10u) {
        let bl = pu(7u);
        let unit = e * pu(16u) + n * pu(4u) + k / bl;
        return w_dequant(dt, pu(6u) + unit * pu(8u), k % bl);
    }
    return load_w(pu(6u) + e * pu(16u) + n * pu(4u) + k * pu(5u), dt);
}

@compute @workgroup_size(64)
fn expert_linear(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wg, nwg);
    let n_win = pu(1u);
    if (g >= n_win * pu(0u)) { return; }
    let n = g % n_win;
    let r = g / n_win;
    let e = el_ids[strided(EL_IDS_L, r)];
    let col = pu(14u) + n;
    let o = pu(12u) + r * pu(13u) + col;
    if (e >= pu(20u)) {
        // An id no expert has (device ids are the kernel's to guard): NaN, never a read
        // outside the stack.
        if (lid == 0u) { el_out[o] = nan_f32(); }
        return;
    }
    if (e < pu(17u) || e >= pu(18u)) { return; }
    let e_rel = e - pu(17u);
    let k_len = pu(2u);
    let step = pu(15u);
    let row = strided(EL_X_L, r);
    var acc = 0.0;
    for (var k = lid; k < k_len; k += EL_WG) {
        acc += el_x[row + k * step] * expert_weight(e_rel, n, k);
    }
    el_partial[lid] = acc;
    workgroupBarrier();
    for (var half = EL_WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) { el_partial[lid] = el_partial[lid] + el_partial[lid + half]; }
        workgroupBarrier();
    }
    if (lid == 0u) { el_out[o] = el_partial[0]; }
}
