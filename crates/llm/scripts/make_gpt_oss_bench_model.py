#!/usr/bin/env python3
"""A random-weight gpt-oss GGUF for speed comparisons (not for accuracy): transformers'
`GptOssForCausalLM` built from a config scaled down from gpt-oss-20b, converted by
llama.cpp's `convert_hf_to_gguf.py` to BF16, with a small SentencePiece vocabulary
trained on a few lines (as `tests/data/hf/make_references.py` makes it). Quantize it afterwards as gpt-oss ships, `tempra quantize --type mxfp4_moe`, and
run `tempra bench` and llama.cpp's `llama-bench` on the same file.

    python make_gpt_oss_bench_model.py --convert /path/to/llama.cpp/convert_hf_to_gguf.py \\
        --out gpt-oss-bench-bf16.gguf

Shape (default): hidden 1024, 16 layers (alternating sliding window 128 and full),
16 query / 4 KV heads of 64, 32 experts of width 1024, 4 used: about 1.7 B parameters,
0.3 B active per token.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/data/hf"))
from make_references import CONVERT, train_tokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convert", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--experts", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)
    yarn = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
            "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096}
    config = transformers.GptOssConfig(
        vocab_size=320, hidden_size=1024, intermediate_size=1024, num_hidden_layers=args.layers,
        num_attention_heads=16, num_key_value_heads=4, head_dim=64, num_local_experts=args.experts,
        num_experts_per_tok=4, sliding_window=128, max_position_embeddings=8192,
        rope_parameters=yarn, bos_token_id=1, eos_token_id=2, pad_token_id=None,
        tie_word_embeddings=False)
    model = transformers.GptOssForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train_tokenizer(tmp)
        hf = tmp / "model"
        model.save_pretrained(hf, safe_serialization=True)
        cfg = json.loads((hf / "config.json").read_text())
        cfg.update({"rope_theta": 150000.0, "rope_scaling": yarn})
        (hf / "config.json").write_text(json.dumps(cfg))
        (hf / "tokenizer.model").write_bytes((tmp / "tokenizer.model").read_bytes())
        env = {"PYTHONPATH": str(args.convert.parent / "gguf-py"), "NO_LOCAL_GGUF": "", "SPM_VOCAB": "1",
               "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-c", CONVERT, str(args.convert), str(hf), "--outtype", "bf16",
                        "--outfile", str(args.out)], check=True, env=env, stdout=subprocess.DEVNULL)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
