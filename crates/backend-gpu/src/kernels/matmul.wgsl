// Batched matrix product out[b, m, n] = Σ_k a[b, m, k] · b[b, k, n] with f32
// accumulation; a and b are f32, f16 or bf16 views with any strides. Tiles of 64×64
// outputs per workgroup, 4×4 per invocation, K in steps of 16 through workgroup memory.
// Params: 0 M, 1 N, 2 K, 3 batches, 4 a dtype, 5 b dtype, 6 a stride m, 7 a stride k,
// 8 b stride k, 9 b stride n, 10 out offset, 11 tiles m, 12 tiles n, 16 a batch layout,
// 30 b batch layout.

@group(0) @binding(1) var<storage, read> lhs: array<u32>;
@group(0) @binding(2) var<storage, read> rhs: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const A_L: u32 = 16u;
const B_L: u32 = 30u;
const TILE: u32 = 64u;
const KT: u32 = 16u;

var<workgroup> ta: array<f32, 1024>; // [64 rows][16 k]
var<workgroup> tb: array<f32, 1024>; // [16 k][64 cols]

@compute @workgroup_size(256)
fn matmul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wg, nwg);
    let tiles_m = pu(11u);
    let tiles_n = pu(12u);
    let per_batch = tiles_m * tiles_n;
    if (g >= per_batch * pu(3u)) { return; }
    let batch = g / per_batch;
    let m0 = ((g % per_batch) / tiles_n) * TILE;
    let n0 = (g % tiles_n) * TILE;
    let m_len = pu(0u);
    let n_len = pu(1u);
    let k_len = pu(2u);
    let a_dt = pu(4u);
    let b_dt = pu(5u);
    let a_base = strided(A_L, batch);
    let b_base = strided(B_L, batch);
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) { acc[i] = 0.0; }
    for (var k0 = 0u; k0 < k_len; k0 += KT) {
        for (var l = 0u; l < 4u; l++) {
            let idx = lid + l * 256u;
            let ar = idx / KT;
            let ak = idx % KT;
            var av = 0.0;
            if (m0 + ar < m_len && k0 + ak < k_len) {
                av = load_lhs(a_base + (m0 + ar) * pu(6u) + (k0 + ak) * pu(7u), a_dt);
            }
            ta[idx] = av;
            let bk = idx / TILE;
            let bc = idx % TILE;
            var bv = 0.0;
            if (k0 + bk < k_len && n0 + bc < n_len) {
                bv = load_rhs(b_base + (k0 + bk) * pu(8u) + (n0 + bc) * pu(9u), b_dt);
            }
            tb[idx] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < KT; kk++) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var r = 0u; r < 4u; r++) { av[r] = ta[(ty * 4u + r) * KT + kk]; }
            for (var c = 0u; c < 4u; c++) { bv[c] = tb[kk * TILE + tx * 4u + c]; }
            for (var r = 0u; r < 4u; r++) {
                for (var c = 0u; c < 4u; c++) {
                    acc[r * 4u + c] = fma(av[r], bv[c], acc[r * 4u + c]);
                }
            }
        }
        workgroupBarrier();
    }
    let o = pu(10u) + batch * m_len * n_len;
    for (var r = 0u; r < 4u; r++) {
        let m = m0 + ty * 4u + r;
        if (m >= m_len) { continue; }
        for (var c = 0u; c < 4u; c++) {
            let n = n0 + tx * 4u + c;
            if (n < n_len) {
                out[o + m * n_len + n] = acc[r * 4u + c];
            }
        }
    }
}
