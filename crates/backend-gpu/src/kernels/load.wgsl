// Float loads from an `array<u32>` binding named BUF: dtype codes 0 f32, 1 f16, 2 bf16.
fn load_BUF(u: u32, dt: u32) -> f32 {
    if (dt == 0u) {
        return bitcast<f32>(BUF[u]);
    }
    let half_bits = (BUF[u >> 1u] >> ((u & 1u) * 16u)) & 0xffffu;
    if (dt == 1u) {
        return unpack2x16float(half_bits).x;
    }
    return bitcast<f32>(half_bits << 16u);
}
