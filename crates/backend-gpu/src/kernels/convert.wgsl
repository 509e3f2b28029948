// Conversions from f32 with Rust's semantics: round-to-nearest-even for f16/bf16,
// saturating truncation (NaN to 0) for integers.

fn f32_to_f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let exp = i32((b >> 23u) & 0xffu);
    var mant = b & 0x7fffffu;
    if (exp == 255) {
        return sign | 0x7c00u | select(0u, 0x200u | (mant >> 13u), mant != 0u);
    }
    let e = exp - 112;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        mant = mant | 0x800000u;
        let shift = u32(14 - e);
        var h = mant >> shift;
        let rem = mant & ((1u << shift) - 1u);
        let half_way = 1u << (shift - 1u);
        if (rem > half_way || (rem == half_way && (h & 1u) == 1u)) {
            h = h + 1u;
        }
        return sign | h;
    }
    var h = (u32(e) << 10u) | (mant >> 13u);
    let rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) {
        h = h + 1u;
    }
    return sign | h;
}

fn f32_to_bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return ((b >> 16u) | 0x40u) & 0xffffu;
    }
    return ((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn f32_to_i32_sat(x: f32) -> i32 {
    if (is_nan(x)) { return 0; }
    if (x >= 2147483648.0) { return 2147483647; }
    if (x <= -2147483648.0) { return -2147483647 - 1; }
    return i32(x);
}

fn f32_to_u32_sat(x: f32, max_value: u32) -> u32 {
    if (is_nan(x) || x <= 0.0) { return 0u; }
    if (x >= f32(max_value)) { return max_value; }
    return min(u32(x), max_value);
}
