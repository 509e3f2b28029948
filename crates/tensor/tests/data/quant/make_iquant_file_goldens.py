#!/usr/bin/env python3
"""Makes I-quant and ternary model files with llama.cpp's own tools and writes a few of
their blocks as goldens for tests/iquant_files.rs (no Python or llama.cpp runs there).

    python make_iquant_file_goldens.py --llama-bin DIR            # goldens (tiny model)
    python make_iquant_file_goldens.py --llama-bin DIR --shape 1b --keep OUT --no-goldens
                                                                  # 1b files to benchmark

DIR holds `llama-quantize` and `llama-imatrix` built from the llama.cpp inside the
llama-cpp-python 0.3.36 source distribution (targets `llama-quantize llama-imatrix`,
`-DGGML_NATIVE=ON`). The steps:

1. `cargo xtask make-model --arch llama --shape SHAPE --dtype f16` (a random-init model
   with a working tokenizer, seed 0);
2. `llama-imatrix` over a seeded pseudo-text (CALIBRATION_WORDS words), for the IQ1,
   IQ2 and IQ3 types (IMATRIX_TYPES);
3. `llama-quantize` to each file type of TYPES (2 threads);
4. for the goldens: in each file, the first tensor stored in the target type (gguf-py's
   reader), its first BLOCKS blocks and its last BLOCKS, as `file/<type>.bin`, with
   gguf-py's dequantization of them as
   `file/<type>.dequant.f32`; `file/provenance.txt` names the tensors.

llama-quantize's choices depend on the CPU's floating point (its searches run in f32 with
whatever contraction the compiler chose), so rerunning may pick other levels in rare ties:
the goldens need not be byte-identical on another machine, only dequantized by gguf-py as
written.
"""

import argparse
import pathlib
import random
import subprocess
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[4]

# llama-quantize's file type -> the ggml type most of its tensors have. llama.cpp's
# "IQ2_S" file type stores mostly IQ2_XS; its "IQ2_M" is the one of mostly IQ2_S.
TYPES = {
    "IQ4_NL": Q.IQ4_NL, "IQ4_XS": Q.IQ4_XS, "IQ3_S": Q.IQ3_S, "IQ3_XXS": Q.IQ3_XXS,
    "IQ2_M": Q.IQ2_S, "IQ2_XS": Q.IQ2_XS, "IQ2_XXS": Q.IQ2_XXS, "IQ1_S": Q.IQ1_S,
    "IQ1_M": Q.IQ1_M, "TQ1_0": Q.TQ1_0, "TQ2_0": Q.TQ2_0,
}
# Quantized with an importance matrix: the IQ1/IQ2/IQ3 types (llama.cpp refuses most of
# them, or tensors of their mixes, without one). IQ4_NL/IQ4_XS without, as tempra
# quantizes them.
IMATRIX_TYPES = {"IQ3_S", "IQ3_XXS", "IQ2_M", "IQ2_XS", "IQ2_XXS", "IQ1_S", "IQ1_M"}
BLOCKS = 2
CALIBRATION_WORDS = 3000


def calibration_text() -> str:
    """A seeded pseudo-English text (the model is random: any text exercises it)."""
    words = ("the a of and to in is was it for on with as by at from that this which an "
             "model weight layer token value block scale grid sign row column matrix "
             "quantized index table sum product activation norm head rope cache step").split()
    rng = random.Random(20251204)
    return " ".join(rng.choice(words) for _ in range(CALIBRATION_WORDS)) + "\n"


def run(cmd: list) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=REPO)


def make_files(bin_dir: pathlib.Path, out: pathlib.Path, shape: str) -> None:
    f16 = out / f"{shape}-f16.gguf"
    if not f16.exists():
        run(["cargo", "xtask", "make-model", "--arch", "llama", "--shape", shape,
             "--dtype", "f16", "-o", f16])
    imatrix = out / f"{shape}-imatrix.gguf"
    if not imatrix.exists():
        text = out / "calibration.txt"
        text.write_text(calibration_text())
        run([bin_dir / "llama-imatrix", "-m", f16, "-f", text, "-o", imatrix, "-c", "128",
             "--chunks", "8", "-t", "2"])
    for name in TYPES:
        target = out / f"{shape}-{name.lower()}.gguf"
        if target.exists():
            continue
        extra = ["--imatrix", imatrix] if name in IMATRIX_TYPES else []
        run([bin_dir / "llama-quantize", *extra, f16, target, name, "2"])


def write_goldens(out: pathlib.Path, shape: str) -> None:
    dest = HERE / "file"
    dest.mkdir(exist_ok=True)
    provenance = []
    for name, qtype in TYPES.items():
        reader = GGUFReader(out / f"{shape}-{name.lower()}.gguf")
        tensor = next(t for t in reader.tensors if t.tensor_type == qtype)
        name = qtype.name
        data = np.asarray(tensor.data).reshape(-1)
        block_len, block_bytes = GGML_QUANT_SIZES[qtype]
        take = BLOCKS * block_bytes
        blocks = np.concatenate([data[:take], data[-take:]]).astype(np.uint8)
        blocks.tofile(dest / f"{name.lower()}.bin")
        values = dequantize(blocks, qtype).astype(np.float32).reshape(-1)
        assert values.size == 2 * BLOCKS * block_len
        values.astype("<f4").tofile(dest / f"{name.lower()}.dequant.f32")
        provenance.append(f"{name.lower()}: {tensor.name} {[int(d) for d in tensor.shape]}, "
                          f"its first {BLOCKS} blocks and its last {BLOCKS}")
    (dest / "provenance.txt").write_text("\n".join(provenance) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-bin", type=pathlib.Path, required=True,
                        help="folder with llama-quantize and llama-imatrix")
    parser.add_argument("--shape", default="tiny", help="xtask make-model's --shape")
    parser.add_argument("--keep", type=pathlib.Path,
                        help="write the model files here (default: a temporary folder)")
    parser.add_argument("--no-goldens", action="store_true", help="only make the files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or pathlib.Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        make_files(args.llama_bin.resolve(), out.resolve(), args.shape)
        if not args.no_goldens:
            write_goldens(out.resolve(), args.shape)


if __name__ == "__main__":
    main()
