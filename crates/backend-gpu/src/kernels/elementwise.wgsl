// Elementwise ops on f32: unary, binary (broadcast inputs are stride-0 views), binary
// with a scalar, and binary in place.
// Params: 0 n, 1 op, 2 scalar (f32), 4 out layout, 18 a layout, 32 b layout.

@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const OUT_L: u32 = 4u;
const A_L: u32 = 18u;
const B_L: u32 = 32u;

fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }

// Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
fn erf_approx(x: f32) -> f32 {
    let s = sign(x);
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
        + 0.254829592) * t * exp(-z * z);
    return s * y;
}

fn unary_op(op: u32, x: f32) -> f32 {
    var r = 0.0;
    switch op {
        case 0u: { r = -x; }
        case 1u: { r = abs(x); }
        case 2u: { r = x * x; }
        case 3u: { r = 1.0 / x; }
        case 4u: { r = exp(x); }
        case 5u: {
            if (x > 0.0) { r = log(x); } else if (x == 0.0) { r = -inf_f32(); } else { r = nan_f32(); }
        }
        case 6u: {
            if (x >= 0.0) { r = sqrt(x); } else { r = nan_f32(); }
        }
        case 7u: {
            if (x > 0.0) {
                r = inverseSqrt(x);
            } else if (x == 0.0) {
                r = select(inf_f32(), -inf_f32(), (bitcast<u32>(x) >> 31u) == 1u);
            } else {
                r = nan_f32();
            }
        }
        case 8u: { r = tanh_safe(x); }
        case 9u: { r = sigmoid(x); }
        case 10u: { r = select(0.0, x, x > 0.0 || is_nan(x)); }
        case 11u: { r = x * sigmoid(x); }
        case 12u: {
            r = 0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        }
        default: { r = 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }
    }
    if (is_nan(x)) { r = x; }
    return r;
}

fn binary_op(op: u32, x: f32, y: f32) -> f32 {
    var r = 0.0;
    switch op {
        case 0u: { r = x + y; }
        case 1u: { r = x - y; }
        case 2u: { r = x * y; }
        case 3u: { r = x / y; }
        case 4u: { r = max(x, y); }
        default: { r = min(x, y); }
    }
    if (op >= 4u && (is_nan(x) || is_nan(y))) { r = nan_f32(); }
    return r;
}

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    out[strided(OUT_L, i)] = unary_op(pu(1u), a[strided(A_L, i)]);
}

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    out[strided(OUT_L, i)] = binary_op(pu(1u), a[strided(A_L, i)], b[strided(B_L, i)]);
}

@compute @workgroup_size(256)
fn binary_scalar(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    out[strided(OUT_L, i)] = binary_op(pu(1u), a[strided(A_L, i)], pf(2u));
}

// out = op(out, b): `a` is not read (bound to b's buffer).
@compute @workgroup_size(256)
fn binary_inplace(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let o = strided(OUT_L, i);
    out[o] = binary_op(pu(1u), out[o], b[strided(B_L, i)]);
}
