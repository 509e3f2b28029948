#!/usr/bin/env python3
"""Regenerates the quantization goldens that tests/quant_golden.rs checks tempra against.

    pip install gguf numpy
    python make_quant_goldens.py                    # the gguf goldens (this folder)
    python make_quant_goldens.py --ggml-src DIR     # also the ggml/ goldens, DIR being a
                                                    # llama.cpp checkout's ggml/ folder

Peer 1, the `gguf` Python package (llama.cpp's gguf-py), quantizes Q4_0, Q4_1, Q5_0, Q5_1
and Q8_0 and dequantizes every storage format:

    legacy_input.f32          1024 fixed f32 inputs (seeded; see legacy_input())
    <type>.bin                gguf.quants.quantize(legacy_input, <type>)       legacy types
    <type>.dequant.f32        gguf.quants.dequantize(<type>.bin)               legacy types
    <type>.random.bin         random blocks with sane f16 scales (random_blocks())
    <type>.random.dequant.f32 gguf.quants.dequantize(<type>.random.bin)        all 10 types
    mxfp4.bin, mxfp4.dequant.f32, mxfp4.random.bin, mxfp4.random.dequant.f32   the same for MXFP4

Peer 2, ggml's own C reference (ggml-quants.c, ggml-cpu/quants.c), built from
ggml_reference.c with a C compiler, covers what gguf-py cannot: K-quant, Q8_1 and Q8_K
quantization and the scalar quantized dot products:

    ggml/input.f32            2048 fixed f32 weights (seeded; see ggml_input())
    ggml/act.f32              2048 f32 activations (seeded gaussian)
    ggml/<type>.bin           quantize_row_<type>_ref(input)                   all 12 types
    ggml/act.<type>.bin       quantize_row_<type>_ref(act)           q8_0, q8_1, q8_K
    ggml/<type>.vec_dot.f32   ggml_vec_dot_<type>_<act>_generic, 4 rows of 512 values

All files are raw little-endian arrays. Everything is seeded: rerunning with the same
package versions rewrites identical bytes.
"""

import argparse
import pathlib
import subprocess
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

HERE = pathlib.Path(__file__).resolve().parent

LEGACY = {"q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "q8_0": Q.Q8_0}
K_QUANTS = {"q2_K": Q.Q2_K, "q3_K": Q.Q3_K, "q4_K": Q.Q4_K, "q5_K": Q.Q5_K, "q6_K": Q.Q6_K}
I_QUANTS = {
    "iq2_xxs": Q.IQ2_XXS, "iq2_xs": Q.IQ2_XS, "iq2_s": Q.IQ2_S, "iq3_xxs": Q.IQ3_XXS,
    "iq3_s": Q.IQ3_S, "iq1_s": Q.IQ1_S, "iq1_m": Q.IQ1_M, "iq4_nl": Q.IQ4_NL,
    "iq4_xs": Q.IQ4_XS, "tq1_0": Q.TQ1_0, "tq2_0": Q.TQ2_0,
}
# The I-quant and ternary formats ggml quantizes without an importance matrix
# (quantize_iq4_nl/quantize_iq4_xs as llama-quantize calls them, quantize_row_tq*_ref).
I_QUANTIZABLE = ["iq4_nl", "iq4_xs", "tq1_0", "tq2_0"]

# (values per block, bytes per block, byte offsets of the f16 scale fields)
LAYOUT = {
    "q4_0": (32, 18, [0]),
    "q4_1": (32, 20, [0, 2]),
    "q5_0": (32, 22, [0]),
    "q5_1": (32, 24, [0, 2]),
    "q8_0": (32, 34, [0]),
    "q2_K": (256, 84, [80, 82]),
    "q3_K": (256, 110, [108]),
    "q4_K": (256, 144, [0, 2]),
    "q5_K": (256, 176, [0, 2]),
    "q6_K": (256, 210, [208]),
    "iq2_xxs": (256, 66, [0]),
    "iq2_xs": (256, 74, [0]),
    "iq2_s": (256, 82, [0]),
    "iq3_xxs": (256, 98, [0]),
    "iq3_s": (256, 110, [0]),
    "iq1_s": (256, 50, [0]),
    "iq1_m": (256, 56, "iq1_m"),  # the f16 scale is four nibbles, see random_blocks()
    "iq4_nl": (32, 18, [0]),
    "iq4_xs": (256, 136, [0]),
    "tq1_0": (256, 54, [52]),
    "tq2_0": (256, 66, [64]),
}

# Weight type -> activation type of ggml's vec_dot (ggml-cpu's vec_dot_type).
VEC_DOT = {
    "q4_0": "q8_0", "q5_0": "q8_0", "q8_0": "q8_0", "q4_1": "q8_1", "q5_1": "q8_1",
    "q2_K": "q8_K", "q3_K": "q8_K", "q4_K": "q8_K", "q5_K": "q8_K", "q6_K": "q8_K",
}
I_VEC_DOT = {name: ("q8_0" if name == "iq4_nl" else "q8_K") for name in I_QUANTS}
ALL_TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1",
             "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K"]


def legacy_input(rng: np.random.Generator) -> np.ndarray:
    """32 blocks of 32 values, each block one case the 32-value formats must get right."""
    blocks = [rng.standard_normal(32) for _ in range(6)]
    blocks += [
        np.zeros(32),                                           # all zero: d = 0
        np.full(32, 0.75),                                      # all equal, positive
        np.full(32, -3.0),                                      # all equal, negative
        np.linspace(-1.0, 1.0, 32),                             # ramp
        np.arange(32) - 16.0,                                   # exact 5-bit grid
        np.where(np.arange(32) % 2 == 0, 6.0e4, -1.0e-3) * rng.choice([-1, 1], 32),  # extremes
        np.where(np.arange(32) == 9, 5.0, 0.0),                 # one spike
        np.concatenate([[127.0], np.arange(31) * 0.5 - 7.5]),   # Q8_0 ties at .5
        np.concatenate([[-2.0, 2.0], rng.uniform(-1, 1, 30)]),  # |max| tie: first wins
        np.concatenate([[2.0, -2.0], rng.uniform(-1, 1, 30)]),
        rng.standard_normal(32) * 1e-8,                         # scale underflows f16
        rng.standard_normal(32) * 1e-5,                         # f16-subnormal scale
        rng.standard_normal(32) * 1e3,
        rng.uniform(0.0, 1.0, 32),                              # all positive (min > 0)
        -rng.uniform(0.0, 1.0, 32),                             # all negative
        rng.laplace(0.0, 1.0, 32),
        np.clip(rng.standard_cauchy(32), -50, 50),
        rng.exponential(1.0, 32),
    ]
    blocks += [rng.standard_normal(32) * 10 ** rng.uniform(-3, 3) for _ in range(32 - len(blocks))]
    return np.concatenate(blocks).astype(np.float32)


def ggml_input(rng: np.random.Generator) -> np.ndarray:
    """8 super-blocks of 256 values with the cases the K-quant scale searches branch on."""
    sparse = np.where(rng.random(256) < 0.85, 0.0, rng.standard_normal(256))
    zero_subs = rng.standard_normal(256)
    zero_subs[16:48] = 0.0                                      # zero 16- and 32-value sub-blocks
    zero_subs[160:176] = 1e-20                                  # below GROUP_MAX_EPS
    steps = np.repeat(rng.standard_normal(16) * 3, 16)          # constant sub-blocks
    extremes = rng.standard_normal(256)
    extremes[[3, 100, 200]] = [6.0e4, -6.0e4, 3.0e4]
    scaled = rng.standard_normal(256) * np.repeat(10 ** rng.uniform(-4, 2, 16), 16)
    blocks = [
        rng.standard_normal(256),
        sparse,
        zero_subs,
        steps,
        extremes,
        rng.uniform(0.0, 2.0, 256),                             # all positive: min clamps to 0
        np.clip(rng.standard_cauchy(256), -100, 100),
        scaled,
    ]
    return np.concatenate(blocks).astype(np.float32)


def f16_scales(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite f16 scales: random magnitudes 1e-4..1 of either sign, plus edge values."""
    values = rng.choice([-1.0, 1.0], n) * 10 ** rng.uniform(-4, 0, n)
    edges = [0.0, -0.0, 5.96e-8, 1.0, 65504.0, -3.0e-5]         # zero, subnormal, f16 max
    values[: min(n, len(edges))] = edges[: min(n, len(edges))]
    return values.astype(np.float16)


def random_blocks(rng: np.random.Generator, name: str, n_blocks: int) -> np.ndarray:
    """Random block bytes whose f16 fields are replaced by finite scales."""
    _, block_bytes, f16_offsets = LAYOUT[name]
    blocks = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    if f16_offsets == "iq1_m":
        # IQ1_M keeps its f16 scale in the top nibbles of the four u16 words at byte 48.
        bits = rng.permutation(f16_scales(rng, n_blocks)).view(np.uint16)
        words = blocks[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            words[:, k] = (words[:, k] & 0x0FFF) | (((bits >> (4 * k)) & 0xF) << 12)
        blocks[:, 48:56] = words.view(np.uint8)
        return blocks.reshape(-1)
    for offset in f16_offsets:
        scales = rng.permutation(f16_scales(rng, n_blocks))
        blocks[:, offset:offset + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def write(path: pathlib.Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    array.astype(array.dtype.newbyteorder("<"), copy=False).tofile(path)


def make_gguf_goldens() -> None:
    rng = np.random.default_rng(20240601)
    x = legacy_input(rng)
    write(HERE / "legacy_input.f32", x)
    for name, qtype in LEGACY.items():
        q = quantize(x, qtype)
        write(HERE / f"{name}.bin", q)
        write(HERE / f"{name}.dequant.f32", dequantize(q, qtype).astype(np.float32))
    for name, qtype in {**LEGACY, **K_QUANTS}.items():
        block_len = LAYOUT[name][0]
        blocks = random_blocks(rng, name, 8 if block_len == 256 else 32)
        write(HERE / f"{name}.random.bin", blocks)
        write(HERE / f"{name}.random.dequant.f32", dequantize(blocks, qtype).astype(np.float32))
    # Drawn after the formats above, so adding these left those files unchanged.
    for name, qtype in I_QUANTS.items():
        block_len = LAYOUT[name][0]
        blocks = random_blocks(rng, name, 8 if block_len == 256 else 64)
        write(HERE / f"{name}.random.bin", blocks)
        write(HERE / f"{name}.random.dequant.f32", dequantize(blocks, qtype).astype(np.float32))
    # MXFP4, which gguf-py quantizes too: the legacy input (every exponent it needs lies
    # well inside E8M0's range) and random blocks, whose random exponent bytes cover the
    # subnormal scales (0, 1) and the largest (255). Drawn last, as above.
    q = quantize(x, Q.MXFP4)
    write(HERE / "mxfp4.bin", q)
    write(HERE / "mxfp4.dequant.f32", dequantize(q, Q.MXFP4).astype(np.float32))
    blocks = rng.integers(0, 256, (64, 17), dtype=np.uint8)
    blocks[:4, 0] = [0, 1, 128, 255]
    blocks = blocks.reshape(-1)
    write(HERE / "mxfp4.random.bin", blocks)
    write(HERE / "mxfp4.random.dequant.f32", dequantize(blocks, Q.MXFP4).astype(np.float32))


def make_ggml_goldens(ggml_src: pathlib.Path, cc: str) -> None:
    out = HERE / "ggml"
    rng = np.random.default_rng(20240602)
    x = ggml_input(rng)
    act = (rng.standard_normal(x.size) * 2).astype(np.float32)
    act[256:512] = 0.0                                          # an all-zero activation block
    write(out / "input.f32", x)
    write(out / "act.f32", act)
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "ggml_reference"
        subprocess.run(
            [cc, "-O2", "-ffp-contract=off", "-std=gnu11",
             "-I", ggml_src / "include", "-I", ggml_src / "src", "-I", ggml_src / "src" / "ggml-cpu",
             HERE / "ggml_reference.c", ggml_src / "src" / "ggml-quants.c",
             ggml_src / "src" / "ggml-cpu" / "quants.c", "-lm", "-o", exe],
            check=True,
        )
        for name in ALL_TYPES:
            subprocess.run([exe, "q", name, out / "input.f32", out / f"{name}.bin"], check=True)
        for name in sorted(set(VEC_DOT.values())):
            subprocess.run([exe, "q", name, out / "act.f32", out / f"act.{name}.bin"], check=True)
        for name in I_QUANTIZABLE:
            subprocess.run([exe, "q", name, out / "input.f32", out / f"{name}.bin"], check=True)
        rows = x.size // 512
        for w, a in VEC_DOT.items():
            subprocess.run([exe, "v", f"{w}_{a}", str(rows), "512", out / f"{w}.bin",
                            out / f"act.{a}.bin", out / f"{w}.vec_dot.f32"], check=True)
        # The I-quants' dots: the quantizable ones on ggml's own blocks of input.f32, the
        # others on the random blocks of the gguf goldens (2048 values each).
        for w, a in I_VEC_DOT.items():
            blocks = out / f"{w}.bin" if w in I_QUANTIZABLE else HERE / f"{w}.random.bin"
            subprocess.run([exe, "v", f"{w}_{a}", str(rows), "512", blocks,
                            out / f"act.{a}.bin", out / f"{w}.vec_dot.f32"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ggml-src", type=pathlib.Path,
                        help="a llama.cpp checkout's ggml/ folder: also regenerate ggml/")
    parser.add_argument("--cc", default="cc", help="C compiler for ggml_reference.c")
    args = parser.parse_args()
    make_gguf_goldens()
    if args.ggml_src:
        make_ggml_goldens(args.ggml_src.resolve(), args.cc)


if __name__ == "__main__":
    main()
