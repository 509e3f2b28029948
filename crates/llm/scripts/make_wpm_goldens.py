#!/usr/bin/env python3
"""Goldens for tempra's WordPiece tokenizer, on llama.cpp's bert-bge test vocabulary.

Writes crates/llm/tests/data/wpm/bert_bge.json with:
- "llama_cpp_detokenized": for each case of ggml-vocab-bert-bge.gguf.inp, llama.cpp's
  detokenization (llama_detokenize, special tokens kept hidden) of its tokenization
  without special tokens: made by a small C program linked against a llama.cpp build.
- "hf": a handful of strings with the ids Hugging Face `tokenizers`' BERT tokenizer
  (BertWordPieceTokenizer: BertNormalizer, BertPreTokenizer, WordPiece, [CLS]/[SEP]
  framing) gives with the same vocabulary (the GGUF's tokens, `▁x` -> `x`, `x` -> `##x`).

Usage: make_wpm_goldens.py VOCAB_DIR LLAMA_CPP_SRC LLAMA_CPP_BUILD
(VOCAB_DIR as fetched by fetch_llama_cpp_vocabs.py; the build has bin/libllama.so.)
"""
import json
import os
import subprocess
import sys
import tempfile

import gguf
from tokenizers import BertWordPieceTokenizer

SEPARATOR = "\n__ggml_vocab_test__\n"

C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
/* argv[1]: model; stdin: texts separated by NUL; stdout: detokenized texts + NUL */
int main(int argc, char ** argv) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    static char buf[1 << 20];
    static llama_token ids[1 << 16];
    static char out[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, stdin);
    buf[n] = 0;
    size_t pos = 0;
    while (pos < n) {
        size_t len = strlen(buf + pos);
        int nt = llama_tokenize(vocab, buf + pos, (int) len, ids, 1 << 16, false, false);
        int nc = llama_detokenize(vocab, ids, nt, out, sizeof(out), false, false);
        fwrite(out, 1, nc, stdout);
        fputc(0, stdout);
        pos += len + 1;
    }
    llama_model_free(model);
    return 0;
}
"""

HF_TEXTS = [
    "Hello, world!",
    "  Café au LAIT, naïve résumé ",
    "I've been 'told he's there",
    "我想在apple工作1314151天～",
    "unaffable xyzzyqq tokenization",
    "Größe \u00c5ngstr\u00f6m \u0130stanbul",
    "tab\tnew\nline\u00a0nbsp\u200bzero",
    "ḱṷṓn 🚀 $5+3=8 <a|b>",
]


def main():
    vocab_dir, src, build = sys.argv[1:4]
    model = os.path.join(vocab_dir, "ggml-vocab-bert-bge.gguf")
    with open(model + ".inp", encoding="utf-8") as f:
        cases = f.read().split(SEPARATOR)
    if cases and cases[-1] == "":
        cases.pop()

    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "detok.c")
        exe = os.path.join(tmp, "detok")
        with open(c, "w") as f:
            f.write(C_SOURCE)
        lib = os.path.join(build, "bin")
        subprocess.run(
            ["gcc", "-O1", c, "-o", exe, "-I", os.path.join(src, "include"),
             "-I", os.path.join(src, "ggml", "include"), "-L", lib, "-lllama",
             "-Wl,-rpath," + lib],
            check=True,
        )
        stdin = b"".join(t.encode() + b"\0" for t in cases)
        res = subprocess.run([exe, model], input=stdin, capture_output=True, check=True)
    detok = [b.decode("utf-8", "replace") for b in res.stdout.split(b"\0")[:-1]]
    assert len(detok) == len(cases), (len(detok), len(cases))

    reader = gguf.GGUFReader(model)
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode() for i in field.data]
    types = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types.parts[i][0]) for i in types.data]
    hf_vocab = {}
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == 1 and t.startswith("\u2581"):
            t = t[1:]
        elif ty == 1 and not t.startswith("[unused"):
            t = "##" + t
        hf_vocab[t] = i
    tok = BertWordPieceTokenizer(hf_vocab, lowercase=True, strip_accents=True,
                                 clean_text=True, handle_chinese_chars=True)
    hf = [{"text": t, "ids": tok.encode(t).ids} for t in HF_TEXTS]

    out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "wpm", "bert_bge.json")
    with open(out, "w", encoding="utf-8") as f:
        # One line per string and per case: small diffs when regenerated.
        f.write('{\n "llama_cpp_detokenized": [\n')
        f.write(",\n".join("  " + json.dumps(d, ensure_ascii=False) for d in detok))
        f.write('\n ],\n "hf": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in hf))
        f.write("\n ]\n}\n")
    print(f"wrote {out}: {len(detok)} detokenizations, {len(hf)} HF cases")


if __name__ == "__main__":
    main()
