#!/usr/bin/env python3
"""`tempra quantize` against llama.cpp's `llama-quantize` on the same model: for each type,
the weights' root mean square error against the source weights (over every tensor the
type quantizes) and the file size, of both files, and whether both chose the same dtype
for every tensor.

    python crates/llm/scripts/compare_quantize.py --model 1b-f16.gguf \\
        --tempra target/release/tempra --llama-bin DIR --types iq4_nl iq4_xs [--keep OUT]

DIR holds `llama-quantize` (the llama.cpp of the llama-cpp-python 0.3.36 source
distribution). Both quantize without an importance matrix. The source weights are read
with gguf-py and widened to f32 (an F16 model's weights are exactly its f32 weights);
the quantized ones are dequantized with gguf-py (`gguf.quants.dequantize`), which the
tempra-tensor goldens check tempra against bit for bit.
"""

import argparse
import os
import pathlib
import subprocess
import tempfile

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def tensors(path: pathlib.Path) -> dict:
    return {t.name: t for t in GGUFReader(path).tensors}


def values(t) -> np.ndarray:
    """A tensor's values as f32 (block formats dequantized by gguf-py)."""
    data = np.asarray(t.data)
    if t.tensor_type.name in ("F32", "F16", "BF16"):
        return data.astype(np.float32).reshape(-1)
    return dequantize(data, t.tensor_type).astype(np.float32).reshape(-1)


def compare(source: dict, path: pathlib.Path) -> tuple:
    """(RMS error over the quantized tensors, their count, {name: dtype})."""
    sq, n, count, types = 0.0, 0, 0, {}
    for name, t in tensors(path).items():
        types[name] = t.tensor_type.name
        if t.tensor_type.name in ("F32", "F16", "BF16"):
            continue
        diff = values(t).astype(np.float64) - values(source[name]).astype(np.float64)
        sq += float(np.dot(diff, diff))
        n += diff.size
        count += 1
    return (np.sqrt(sq / n) if n else 0.0), count, types


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=pathlib.Path, required=True, help="F32/F16 GGUF")
    parser.add_argument("--tempra", type=pathlib.Path, required=True, help="tempra binary")
    parser.add_argument("--llama-bin", type=pathlib.Path, required=True)
    parser.add_argument("--types", nargs="+", default=["iq4_nl", "iq4_xs"])
    parser.add_argument("--keep", type=pathlib.Path, help="keep the files here")
    args = parser.parse_args()
    source = tensors(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or pathlib.Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for qtype in args.types:
            ours = out / f"tempra-{qtype}.gguf"
            theirs = out / f"llama-{qtype}.gguf"
            if not ours.exists():
                subprocess.run([args.tempra, "quantize", "-m", args.model, "-o", ours,
                                "-t", qtype], check=True)
            if not theirs.exists():
                subprocess.run([args.llama_bin / "llama-quantize", args.model, theirs,
                                qtype.upper(), "2"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rms_ours, n_ours, types_ours = compare(source, ours)
            rms_theirs, n_theirs, types_theirs = compare(source, theirs)
            size_ours, size_theirs = os.path.getsize(ours), os.path.getsize(theirs)
            differ = [k for k in types_theirs if types_ours.get(k) != types_theirs[k]]
            print(f"{qtype}: RMS error tempra {rms_ours:.6e} llama.cpp {rms_theirs:.6e} "
                  f"(ratio {rms_ours / rms_theirs:.4f}); size tempra {size_ours} llama.cpp "
                  f"{size_theirs} bytes (ratio {size_ours / size_theirs:.4f}); "
                  f"{n_ours} quantized tensors; dtype differs on {len(differ)} tensors"
                  + (f": {differ[:5]}" if differ else ""))


if __name__ == "__main__":
    main()
