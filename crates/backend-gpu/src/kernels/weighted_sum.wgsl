// weighted_sum: out[t, d] = Σ_s w[t, s] · x[t, s, d] in slot order, one invocation
// per output element. Params: 0 tokens, 1 k, 2 d, 3 out offset, 8 x layout [T, k, D],
// 22 w layout [T, k].

@group(0) @binding(1) var<storage, read> ws_x: array<f32>;
@group(0) @binding(2) var<storage, read> ws_w: array<f32>;
@group(0) @binding(3) var<storage, read_write> ws_out: array<f32>;

const WS_X_L: u32 = 8u;
const WS_W_L: u32 = 22u;

@compute @workgroup_size(64)
fn weighted_sum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 64u + lid;
    let k = pu(1u);
    let d_len = pu(2u);
    if (i >= pu(0u) * d_len) { return; }
    let t = i / d_len;
    let d = i % d_len;
    var acc = 0.0;
    for (var s = 0u; s < k; s++) {
        let w = ws_w[strided(WS_W_L, t * k + s)];
        acc += w * ws_x[strided(WS_X_L, (t * k + s) * d_len + d)];
    }
    ws_out[pu(3u) + i] = acc;
}

