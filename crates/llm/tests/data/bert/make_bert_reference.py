#!/usr/bin/env python3
"""A tiny random-init BERT encoder and transformers' embeddings of it, for the `bert`
architecture's reference test (issue: logprobs, n, logit_bias and embeddings).

Builds a WordPiece vocabulary from a small text with the `tokenizers` package, a
`transformers.BertModel` from a config (no downloads) whose weights are re-randomised
with a larger spread than the default init (so that positions and heads differ clearly),
marks it as a sentence-transformers model with mean pooling (`modules.json`,
`1_Pooling/config.json`, which llama.cpp's converter reads into `bert.pooling_type`),
converts it with llama.cpp's `convert_hf_to_gguf.py` to an f32 GGUF, and records, for a
few sentences tokenized by transformers' `BertTokenizer`, the token ids and
`last_hidden_state` (every position), its mean over the tokens and its first ([CLS])
row.

Outputs: `bert.gguf` and `bert.json` (`tokens`, `hidden` `[T][D]`, `mean` `[D]`, `cls`
`[D]` per sentence, the generator versions).

Requirements (CPU is enough): `pip install torch transformers tokenizers gguf numpy
safetensors`, and llama.cpp's converter, e.g. from the llama-cpp-python source package
(`pip download --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36`,
unpacked); then

    python make_bert_reference.py --convert /path/to/vendor/llama.cpp/convert_hf_to_gguf.py
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from tokenizers import BertWordPieceTokenizer

HERE = Path(__file__).resolve().parent

TEXT = """Once upon a time there was a little robot named Tempra. It liked to count the
stars and read long books about memory, buffers and pools. Every morning the robot went
to the market to buy apples, bread and a small cup of tea. One day it met a cat who asked:
why do you recycle every block? Because memory churn is slow, said the robot, and the cat
laughed. They walked along the river, talked about tensors and views, and watched the
boats pass under the old stone bridge. In the evening they counted the stars together.
"""

SENTENCES = [
    "The robot counted the stars.",
    "A cat asked why memory churn is slow, and laughed!",
    "Tensors, views and pools: every block recycled.",
]

# The converter, with the pre-tokenizer check of an unknown WordPiece vocabulary
# answered "default" (a BERT vocabulary's text splitting is fixed by the architecture).
CONVERT = """
import os, runpy, sys
path = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "default"
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convert", required=True, help="llama.cpp's convert_hf_to_gguf.py")
    args = parser.parse_args()
    converter = Path(args.convert).resolve()
    torch.manual_seed(35)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bert"
        out.mkdir()
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text(TEXT * 4)
        wordpiece = BertWordPieceTokenizer(lowercase=True)
        wordpiece.train([str(corpus)], vocab_size=300, min_frequency=1)
        wordpiece.save_model(str(out))
        tokenizer = transformers.BertTokenizer(str(out / "vocab.txt"), do_lower_case=True)
        tokenizer.save_pretrained(out)
        config = transformers.BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            type_vocab_size=2,
            hidden_act="gelu",
            layer_norm_eps=1e-12,
            attn_implementation="eager",
        )
        model = transformers.BertModel(config, add_pooling_layer=False).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "LayerNorm" in name:
                    p.copy_(1.0 + 0.2 * torch.randn_like(p) if name.endswith("weight")
                            else 0.2 * torch.randn_like(p))
                else:
                    p.copy_(0.3 * torch.randn_like(p))
        model.save_pretrained(out, safe_serialization=True)
        (out / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]))
        (out / "1_Pooling").mkdir()
        (out / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": 64, "pooling_mode_mean_tokens": True}))
        gguf = HERE / "bert.gguf"
        env = dict(os.environ, PYTHONPATH=str(converter.parent / "gguf-py"))
        subprocess.run(
            [sys.executable, "-c", CONVERT, str(converter), str(out), "--outtype", "f32",
             "--outfile", str(gguf)],
            check=True, env=env, stdout=subprocess.DEVNULL,
        )
        cases = []
        for text in SENTENCES:
            ids = tokenizer(text)["input_ids"]
            with torch.no_grad():
                hidden = model(torch.tensor([ids])).last_hidden_state[0]
            cases.append({
                "text": text,
                "tokens": ids,
                "hidden": hidden.tolist(),
                "mean": hidden.mean(0).tolist(),
                "cls": hidden[0].tolist(),
            })
        (HERE / "bert.json").write_text(json.dumps({
            "generator": {"torch": torch.__version__, "transformers": transformers.__version__},
            "pooling": "mean",
            "cases": cases,
        }))
    print(f"wrote {gguf} and bert.json")


if __name__ == "__main__":
    main()
