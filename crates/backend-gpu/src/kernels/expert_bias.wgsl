// expert_bias: out[r, n] += bias[ids[r], n] over the rows of expert_linear's output
// [R, N] (contiguous), one invocation per element: the bias added to the finished sum, as
// `linear` adds it. An id no expert has leaves the NaN expert_linear wrote.
// Params: 0 rows R, 1 N, 2 experts E, 3 out offset, 4 bias offset, 5 bias expert stride,
// 6 bias row stride, 8 ids layout.

@group(0) @binding(1) var<storage, read> eb_bias: array<f32>;
@group(0) @binding(2) var<storage, read> eb_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> eb_out: array<f32>;

const EB_IDS_L: u32 = 8u;

@compute @workgroup_size(64)
fn expert_bias(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 64u + lid;
    let n_len = pu(1u);
    if (i >= pu(0u) * n_len) { return; }
    let r = i / n_len;
    let n = i % n_len;
    let e = eb_ids[strided(EB_IDS_L, r)];
    if (e >= pu(2u)) { return; }
    let o = pu(3u) + i;
    eb_out[o] = eb_out[o] + eb_bias[pu(4u) + e * pu(5u) + n * pu(6u)];
}
