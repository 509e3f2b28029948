// Copies between layouts with dtype conversion, block copies, dequantization and fill.
// The destination is written through atomics so 1- and 2-byte elements sharing a word
// never race.
// Params: 0 n, 1 src dtype, 2 dst dtype, 3 src base byte (blocks), 4 dst base byte
// (blocks), 5 block bytes, 6 block length, 7 src last dim, 8 fill bits lo, 9 fill bits hi,
// 10 src layout, 24 dst layout.

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<atomic<u32>>;

const SRC_L: u32 = 10u;
const DST_L: u32 = 24u;

// Bytes per element of a plain dtype code.
fn width(dt: u32) -> u32 {
    var w = 4u;
    switch dt {
        case 1u, 2u: { w = 2u; }
        case 5u: { w = 1u; }
        case 6u: { w = 8u; }
        default: {}
    }
    return w;
}

fn is_int(dt: u32) -> bool { return dt >= 3u && dt <= 5u; }

// `w` (1, 2 or 4) bytes at byte `b` of src.
fn src_bits(b: u32, w: u32) -> u32 {
    let word = src[b >> 2u];
    if (w == 4u) { return word; }
    let mask = select(0xffu, 0xffffu, w == 2u);
    return (word >> ((b & 3u) * 8u)) & mask;
}

// Stores the low `w` (1, 2 or 4) bytes of `bits` at byte `b` of dst.
fn store_bits(b: u32, w: u32, bits: u32) {
    let word = b >> 2u;
    if (w == 4u) {
        atomicStore(&dst[word], bits);
        return;
    }
    let shift = (b & 3u) * 8u;
    let mask = select(0xffu, 0xffffu, w == 2u) << shift;
    atomicAnd(&dst[word], ~mask);
    atomicOr(&dst[word], (bits << shift) & mask);
}

fn load_f32(dt: u32, unit: u32) -> f32 {
    let bits = src_bits(unit * width(dt), width(dt));
    var v = 0.0;
    switch dt {
        case 0u: { v = bitcast<f32>(bits); }
        case 1u: { v = unpack2x16float(bits).x; }
        case 2u: { v = bitcast<f32>(bits << 16u); }
        case 3u: { v = f32(bitcast<i32>(bits)); }
        default: { v = f32(bits); }
    }
    return v;
}

fn store_f32(dt: u32, unit: u32, v: f32) {
    var bits = 0u;
    switch dt {
        case 0u: { bits = bitcast<u32>(v); }
        case 1u: { bits = f32_to_f16_bits(v); }
        case 2u: { bits = f32_to_bf16_bits(v); }
        case 3u: { bits = bitcast<u32>(f32_to_i32_sat(v)); }
        case 4u: { bits = f32_to_u32_sat(v, 0xffffffffu); }
        default: { bits = f32_to_u32_sat(v, 255u); }
    }
    store_bits(unit * width(dt), width(dt), bits);
}

// Integer to integer, saturating like Rust's float-mediated conversions.
fn int_convert(sdt: u32, ddt: u32, bits: u32) -> u32 {
    var r = bits;
    if (sdt == 3u) {
        let v = bitcast<i32>(bits);
        if (ddt == 4u) { r = u32(max(v, 0)); }
        if (ddt == 5u) { r = u32(clamp(v, 0, 255)); }
    } else if (sdt == 4u) {
        if (ddt == 3u) { r = min(bits, 0x7fffffffu); }
        if (ddt == 5u) { r = min(bits, 255u); }
    }
    return r;
}

@compute @workgroup_size(256)
fn copy_plain(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let sdt = pu(1u);
    let ddt = pu(2u);
    let su = strided(SRC_L, i);
    let du = strided(DST_L, i);
    if (sdt == ddt) {
        let w = width(sdt);
        if (w == 8u) {
            atomicStore(&dst[du * 2u], src[su * 2u]);
            atomicStore(&dst[du * 2u + 1u], src[su * 2u + 1u]);
        } else {
            store_bits(du * w, w, src_bits(su * w, w));
        }
    } else if (is_int(sdt) && is_int(ddt)) {
        store_bits(du * width(ddt), width(ddt), int_convert(sdt, ddt, src_bits(su * width(sdt), width(sdt))));
    } else {
        store_f32(ddt, du, load_f32(sdt, su));
    }
}

// Same block dtype: one byte per invocation; layouts are over storage units (blocks).
@compute @workgroup_size(256)
fn copy_blocks(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let bb = pu(5u);
    let unit = i / bb;
    let byte = i % bb;
    let s = pu(3u) + strided(SRC_L, unit) * bb + byte;
    let d = pu(4u) + strided(DST_L, unit) * bb + byte;
    store_bits(d, 1u, src_bits(s, 1u));
}

// Block dtype to a float: one element per invocation; the src layout is over units.
@compute @workgroup_size(256)
fn dequantize(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let bl = pu(6u);
    let last = pu(7u);
    let row = i / last;
    let col = i % last;
    let unit = strided(SRC_L, row * (last / bl) + col / bl);
    let v = src_dequant(pu(1u), pu(3u) + unit * pu(5u), col % bl);
    store_f32(pu(2u), strided(DST_L, i), v);
}

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wg, nwg) * 256u + lid;
    if (i >= pu(0u)) { return; }
    let ddt = pu(2u);
    let du = strided(DST_L, i);
    let w = width(ddt);
    if (w == 8u) {
        atomicStore(&dst[du * 2u], pu(8u));
        atomicStore(&dst[du * 2u + 1u], pu(9u));
    } else {
        store_bits(du * w, w, pu(8u));
    }
}
