// gather: out[r, j] = x[r, idx[r, j]] along the last dim (NaN for an index past it), one
// invocation per output element. Params: 0 outputs, 1 N (x's last dim), 2 k (indices'
// last dim), 3 out offset, 8 x layout [.., N], 22 indices layout [.., k].

@group(0) @binding(1) var<storage, read> gather_x: array<f32>;
@group(0) @binding(2) var<storage, read> gather_idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> gather_out: array<f32>;

const GATHER_X_L: u32 = 8u;
const GATHER_I_L: u32 = 22u;

@compute @workgroup_size(64)
fn gather(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 64u + lid;
    if (i >= pu(0u)) { return; }
    let n = pu(1u);
    let row = i / pu(2u);
    let index = gather_idx[strided(GATHER_I_L, i)];
    var v = nan_f32();
    if (index < n) {
        v = gather_x[strided(GATHER_X_L, row * n + index)];
    }
    gather_out[pu(3u) + i] = v;
}
