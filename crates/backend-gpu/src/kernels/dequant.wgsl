// Dequantization of GGUF blocks from an `array<u32>` binding named BUF, one element at
// a time. `b` is the block's first byte, `j` the element in the block. Scale products run
// in `dq` (f16 where the device has SHADER_F16 and the kernel opts in, else f32).
// Dtype codes: 10 q4_0, 11 q8_0, 12 q4_K, 13 q5_K, 14 q6_K, 15 iq4_nl, 16 iq4_xs, 17 mxfp4.

// IQ4_NL's and IQ4_XS's 16 non-linear levels (ggml's kvalues_iq4nl).
var<private> BUF_iq4_levels: array<i32, 16> = array<i32, 16>(
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// MXFP4's E2M1 values doubled (ggml's kvalues_mxfp4).
var<private> BUF_mxfp4_levels: array<i32, 16> = array<i32, 16>(
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

fn BUF_byte(b: u32) -> u32 {
    return (BUF[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// The f16 at even byte `b`.
fn BUF_half(b: u32) -> f32 {
    return unpack2x16float((BUF[b >> 2u] >> ((b & 2u) * 8u)) & 0xffffu).x;
}

fn BUF_i8(b: u32) -> i32 {
    return bitcast<i32>(BUF_byte(b) << 24u) >> 24u;
}

// Sub-block `j`'s 6-bit scale and min of a Q4_K/Q5_K block whose scales start at `b`.
fn BUF_scale_min(b: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(BUF_byte(b + j) & 63u, BUF_byte(b + j + 4u) & 63u);
    }
    let s = (BUF_byte(b + j + 4u) & 15u) | ((BUF_byte(b + j - 4u) >> 6u) << 4u);
    let m = (BUF_byte(b + j + 4u) >> 4u) | ((BUF_byte(b + j) >> 6u) << 4u);
    return vec2<u32>(s, m);
}

fn BUF_dequant(dt: u32, b: u32, j: u32) -> f32 {
    var r = 0.0;
    switch dt {
        case 10u: {
            // q4_0: f16 d; 16 bytes, low nibbles are elements 0..16, high 16..32.
            let byte = BUF_byte(b + 2u + (j & 15u));
            let nib = select(byte & 15u, byte >> 4u, j >= 16u);
            r = f32(dq(BUF_half(b)) * dq(f32(i32(nib) - 8)));
        }
        case 11u: {
            // q8_0: f16 d; 32 signed bytes.
            r = f32(dq(BUF_half(b)) * dq(f32(BUF_i8(b + 2u + j))));
        }
        case 15u: {
            // iq4_nl: f16 d; 16 bytes of level indices laid out as q4_0's nibbles.
            let byte = BUF_byte(b + 2u + (j & 15u));
            let nib = select(byte & 15u, byte >> 4u, j >= 16u);
            r = f32(dq(BUF_half(b)) * dq(f32(BUF_iq4_levels[nib])));
        }
        case 17u: {
            // mxfp4: the E8M0 exponent e, then 16 bytes of level indices laid out as
            // q4_0's nibbles; x = 2^(e - 128) · level, exact in f32 (no f16 product:
            // the scale spans 2^-128..2^127). Blocks are 17 bytes, so `b` may be odd.
            let byte = BUF_byte(b + 1u + (j & 15u));
            let nib = select(byte & 15u, byte >> 4u, j >= 16u);
            r = ldexp(f32(BUF_mxfp4_levels[nib]), i32(BUF_byte(b)) - 128);
        }
        case 16u: {
            // iq4_xs: f16 d, u16 scales_h, scales_l[4], qs[128]; sub-block scale
            // ls - 32 (6 bits: low nibble in scales_l, high 2 bits in scales_h).
            let sub = j / 32u;
            let high = (BUF[(b + 2u) >> 2u] >> (((b + 2u) & 2u) * 8u)) & 0xffffu;
            let ls = ((BUF_byte(b + 4u + sub / 2u) >> (4u * (sub & 1u))) & 15u)
                | (((high >> (2u * sub)) & 3u) << 4u);
            let byte = BUF_byte(b + 8u + 16u * sub + (j & 15u));
            let nib = select(byte & 15u, byte >> 4u, (j & 31u) >= 16u);
            let dl = dq(BUF_half(b)) * dq(f32(i32(ls) - 32));
            r = f32(dl * dq(f32(BUF_iq4_levels[nib])));
        }
        case 12u, 13u: {
            // q4_K: d, dmin, scales[12], qs[128]; q5_K: d, dmin, scales[12], qh[32], qs[128].
            let sub = j / 32u;
            let sm = BUF_scale_min(b + 4u, sub);
            let qs = select(b + 16u, b + 48u, dt == 13u);
            let byte = BUF_byte(qs + 32u * (j / 64u) + (j % 32u));
            var q = select(byte & 15u, byte >> 4u, (sub & 1u) == 1u);
            if (dt == 13u) {
                q = q | (((BUF_byte(b + 16u + (j % 32u)) >> sub) & 1u) << 4u);
            }
            let d1 = dq(BUF_half(b)) * dq(f32(sm.x));
            let m1 = dq(BUF_half(b + 2u)) * dq(f32(sm.y));
            r = f32(d1 * dq(f32(q)) - m1);
        }
        default: {
            // q6_K: ql[128], qh[64], scales i8[16], f16 d at byte 208.
            let n = j / 128u;
            let k = (j % 128u) / 32u;
            let l = j % 32u;
            let low = (BUF_byte(b + 64u * n + 32u * (k % 2u) + l) >> (4u * (k / 2u))) & 15u;
            let high = (BUF_byte(b + 128u + 32u * n + l) >> (2u * k)) & 3u;
            let level = i32(low | (high << 4u)) - 32;
            r = f32(dq(BUF_half(b + 208u)) * dq(f32(BUF_i8(b + 192u + j / 16u))) * dq(f32(level)));
        }
    }
    return r;
}
