// Causal attention with grouped KV heads, sliding window and logit soft-cap: one
// workgroup per query row (lead, t, h), keys in chunks of 64 with an online softmax
// (running max and sum), so no score matrix is stored. k and v are f32 or f16.
// Params: 0 rows, 1 Tq, 2 Hq, 3 Hkv, 4 D, 5 Dv, 6 Tk, 7 scale (f32), 8 q_start,
// 9 window (0: none), 10 softcap (f32, 0: none), 11 k dtype, 12 v dtype, 13 q step,
// 14 k stride t, 15 k stride h, 16 k stride d, 17 v stride t, 18 v stride h,
// 19 v stride d, 20 out offset, 21 q row layout, 35 k lead layout, 49 v lead layout,
// 63 sinks (0: none, 1: one f32 per query head from 64).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const Q_L: u32 = 21u;
const K_L: u32 = 35u;
const V_L: u32 = 49u;
const WG: u32 = 64u;
const MAX_D: u32 = 512u;
const PER_THREAD: u32 = 8u; // MAX_D / WG output dims per invocation

var<workgroup> qs: array<f32, 512>;
var<workgroup> scores: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

fn reduce(lid: u32, x: f32, is_max: bool) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (lid < half) {
            red[lid] = select(red[lid] + red[lid + half], max(red[lid], red[lid + half]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let row = group_index(wg, nwg);
    if (row >= pu(0u)) { return; }
    let tq = pu(1u);
    let hq = pu(2u);
    let d = pu(4u);
    let dv = pu(5u);
    let tk = pu(6u);
    let h = row % hq;
    let t = (row / hq) % tq;
    let lead = row / (hq * tq);
    let kvh = h / (hq / pu(3u));
    let k_base = strided(K_L, lead) + kvh * pu(15u);
    let v_base = strided(V_L, lead) + kvh * pu(18u);
    let k_dt = pu(11u);
    let v_dt = pu(12u);
    let q_base = strided(Q_L, row);
    for (var e = lid; e < d; e += WG) { qs[e] = q[q_base + e * pu(13u)]; }
    workgroupBarrier();

    let q_pos = pu(8u) + t;
    let window = pu(9u);
    let hi = min(q_pos, tk - 1u);
    var lo = 0u;
    if (window > 0u && q_pos + 1u > window) { lo = q_pos + 1u - window; }
    let scale = pf(7u);
    let cap = pf(10u);
    var m = -inf_f32();
    var l = 0.0;
    if (pu(63u) != 0u && pf(64u + h) > -inf_f32()) {
        // The sink joins the softmax as a logit with weight one and no value.
        m = pf(64u + h);
        l = 1.0;
    }
    var acc: array<f32, 8>;
    for (var r = 0u; r < PER_THREAD; r++) { acc[r] = 0.0; }
    for (var c = lo; c <= hi; c += WG) {
        let j = c + lid;
        var s = -inf_f32();
        if (j <= hi) {
            var dot = 0.0;
            let kb = k_base + j * pu(14u);
            for (var e = 0u; e < d; e++) { dot = fma(qs[e], load_k(kb + e * pu(16u), k_dt), dot); }
            s = dot * scale;
            if (cap > 0.0) { s = cap * tanh_safe(s / cap); }
        }
        let new_m = max(m, reduce(lid, s, true));
        let alpha = exp(m - new_m);
        var p = 0.0;
        if (j <= hi) { p = exp(s - new_m); }
        scores[lid] = p;
        l = l * alpha + reduce(lid, p, false);
        m = new_m;
        let count = min(WG, hi + 1u - c);
        for (var r = 0u; r < PER_THREAD; r++) {
            let e = lid + r * WG;
            if (e < dv) {
                var a = acc[r] * alpha;
                for (var jj = 0u; jj < count; jj++) {
                    a = fma(scores[jj], load_v(v_base + (c + jj) * pu(17u) + e * pu(19u), v_dt), a);
                }
                acc[r] = a;
            }
        }
        workgroupBarrier();
    }
    let o = pu(20u) + row * dv;
    for (var r = 0u; r < PER_THREAD; r++) {
        let e = lid + r * WG;
        if (e < dv) {
            out[o + e] = select(0.0, acc[r] / l, l > 0.0);
        }
    }
}
