// Shared by every kernel: the parameter block (binding 0), layout walking, NaN helpers.

struct Params { v: array<vec4<u32>, 32>, }
@group(0) @binding(0) var<uniform> P: Params;

// Parameter word `i` as u32 / as f32 bits.
fn pu(i: u32) -> u32 { return P.v[i >> 2u][i & 3u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }

// A packed layout is 14 words: offset, rank, dims[6], strides[6] (innermost first).
const LAYOUT_WORDS: u32 = 14u;

// The storage unit of element `i` (row-major) of the layout packed at word `base`.
fn strided(base: u32, i: u32) -> u32 {
    let rank = pu(base + 1u);
    var unit = pu(base);
    var rem = i;
    for (var k = 0u; k < rank; k++) {
        let size = pu(base + 2u + k);
        unit += (rem % size) * pu(base + 8u + k);
        rem = rem / size;
    }
    return unit;
}

// The linear workgroup index of a (possibly 2-D) dispatch.
fn group_index(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn nan_f32() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn inf_f32() -> f32 { return bitcast<f32>(0x7f800000u); }

// tanh without the inf/inf of exp-based implementations (|x| > 15 is ±1 in f32).
fn tanh_safe(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
