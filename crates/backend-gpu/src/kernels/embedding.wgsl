// Embedding lookup: out[p, c] = table[ids[p], c], one invocation per output element.
// Dispatched once per window of table rows [v0, v1); ids outside it are skipped.
// Params: 0 n, 1 D, 2 dtype, 3 row stride (units), 4 col stride (units, plain dtypes),
// 5 base of row v0 (units; bytes for blocks), 6 block length, 7 block bytes, 8 v0, 9 v1,
// 10 out offset, 11 ids layout.

@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const IDS_L: u32 = 11u;

@compute @workgroup_size(256)
fn embedding(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let d = pu(1u);
    let p = i / d;
    let c = i % d;
    let id = ids[strided(IDS_L, p)];
    if (id < pu(8u) || id >= pu(9u)) { return; }
    let r = id - pu(8u);
    let dt = pu(2u);
    var v = 0.0;
    if (dt >= 10u) {
        let bl = pu(6u);
        let unit = r * pu(3u) + c / bl;
        v = table_dequant(dt, pu(5u) + unit * pu(7u), c % bl);
    } else {
        v = load_table(pu(5u) + r * pu(3u) + c * pu(4u), dt);
    }
    out[pu(10u) + i] = v;
}
