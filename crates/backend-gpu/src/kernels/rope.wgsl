// Rotary position embedding of x [.., T, H, D]: one invocation per output element.
// `table` holds the rd/2 inverse frequencies (scaling applied on the host), followed by
// the rd/2 frequency factors when present.
// Params: 0 n, 1 D, 2 H, 3 T, 4 rotary dims, 5 neox, 6 direction (f32), 7 has factors,
// 8 positions offset, 9 positions stride, 10 step, 11 out offset, 12 attention factor
// (f32: multiplies the rotated dims), 13 row layout.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;
@group(0) @binding(3) var<storage, read> table: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const ROW_L: u32 = 13u;

@compute @workgroup_size(256)
fn rope(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let d = pu(1u);
    let row = i / d;
    let e = i % d;
    let step = pu(10u);
    let base = strided(ROW_L, row);
    let rd = pu(4u);
    let o = pu(11u) + i;
    if (e >= rd) {
        out[o] = x[base + e * step];
        return;
    }
    let t = (row / pu(2u)) % pu(3u);
    let pos = f32(positions[pu(8u) + t * pu(9u)]);
    let half_rd = rd / 2u;
    var pair = e / 2u;
    var a = 2u * pair;
    var b = a + 1u;
    if (pu(5u) == 1u) {
        pair = e % half_rd;
        a = pair;
        b = pair + half_rd;
    }
    var inv = table[pair];
    if (pu(7u) == 1u) {
        inv = inv / table[half_rd + pair];
    }
    let angle = pf(6u) * pos * inv;
    let reduced = angle - 6.283185307179586 * round(angle * 0.15915494309189535);
    let c = cos(reduced) * pf(12u);
    let s = sin(reduced) * pf(12u);
    let xa = x[base + a * step];
    let xb = x[base + b * step];
    out[o] = select(xa * s + xb * c, xa * c - xb * s, e == a);
}
