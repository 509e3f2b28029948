#!/usr/bin/env python3
"""Trains small tokenizers and writes golden files for tempra's tokenizer tests.

Needs `pip install sentencepiece tokenizers regex` (the Rust tests do not: they read the
JSON files this script writes, which are committed). Everything is generated from fixed
seeds; re-running rewrites the same vocabularies and expectations.

Outputs (next to this script):
  spm_bpe.json         SentencePiece BPE (byte fallback, identity normalizer, dummy
                       prefix): vocabulary + `sp.encode`/`sp.decode` of every case.
  bpe_gpt2.json        byte-level BPE with GPT-2's ByteLevel pre-tokenizer (Hugging Face
                       `tokenizers`): vocabulary, merges + `encode(add_special_tokens=False)`.
  bpe_llama3.json      byte-level BPE with Llama 3's Split regex and ignore_merges.
  pretokenizers.json   the word splits of each pre-tokenizer tempra implements, from
                       Hugging Face `pre_tokenizers.Split` (Oniguruma) or, for llama.cpp's
                       own regex lists, Python's `regex` module, on the cases plus random
                       strings over a mixed-category alphabet.

Each vocabulary file has: model ("llama"/"gpt2"), pre, tokens, scores, types (GGUF
token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte), merges, bos, eos,
unk, add_bos, add_eos, add_space_prefix, ignore_merges, and cases: [{text, ids,
decoded}] (plain tokenization: no BOS/EOS, special-token text not parsed) plus
special_cases: [{text, ids}] (special-token text parsed).
"""

import json
import os
import random
import tempfile

import regex
import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------
# Test strings: llama.cpp's tokenizer test inputs plus the cases the issues list.
CASES = [
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\n\n\n",
    "\t\n",
    "Hello world",
    " Hello world",
    "Hello World",
    " Hello World",
    " Hello World!",
    "Hello, world!",
    " Hello, world!",
    " this is 🦙.cpp",
    "w048 7tuijk dsdfhu",
    "нещо на Български",
    "ምሥራቅ",
    "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "Hello",
    " Hello",
    "  Hello",
    "   Hello",
    "    Hello",
    "    Hello\n    Hello",
    " (",
    "\n =",
    "' era",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "!!!!!!",
    "3",
    "33",
    "333",
    "3333",
    "33333",
    "333333",
    "3333333",
    "33333333",
    "333333333",
    "Cửa Việt",
    " discards",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 "
    "33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= "
    "нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not "
    "sure I'll make it, 'D you like some tea? We'Ve a'lL",
    "ÉCOLE Ärger ÖL ÜBER Ça Ñandú",
    "don't won't it's we'll I'm they're you've he'd",
    "DON'T IT'S WE'LL I'M THEY'RE YOU'VE HE'D",
    "x'ſ y'S",
    "tabs\tbetween\t\twords",
    "line one\nline two\r\nline three\n\n\n",
    "   leading and trailing   ",
    "price: $1,234.56 (12%) on 2024-05-17",
    "中文测试，包括标点。한국어 텍스트 日本語のテキスト",
    "emoji 😀🙂👍🏽 and ZWJ 👨\u200d👩\u200d👧",
    "a\u00a0b\u3000c\u2028d",
    "combining e\u0301 and A\u030a",
    "Ⅻ ½ ٣٤ digits",
    "naïve café résumé Zoë",
    "def f(x):\n    return x ** 2  # square\n",
    "multiple     spaces      here",
    "!?.,;:'\"()[]{}<>/\\|`~@#$%^&*-_=+",
]

SPECIAL_CASES = [
    "<|endoftext|>",
    "Hello<|endoftext|>world",
    " a <|endoftext|> b <|im_end|>\n",
    "<|im_start|>user\nhi<|im_end|>",
]

# ---------------------------------------------------------------------------------------
# Training text.
WORDS = (
    "the quick brown fox jumps over a lazy dog once upon time there was little girl named lily "
    "she loved to play outside in park one day saw big red ball hello world tokenizer model text "
    "language python rust memory buffer pool tensor kernel cache token piece merge score byte "
    "école café naïve résumé zoë über ärger straße élan Ñandú Cửa Việt нещо на Български привет мир "
    "apple work discards normal emojis multiple concatenated only has its own"
).split()
CONTRACTIONS = ["don't", "won't", "it's", "we'll", "I'm", "they're", "you've", "he'd", "y'all", "I've"]
CJK = ["我想在", "工作", "中文", "测试", "标点", "한국어", "텍스트", "日本語", "テキスト"]
EMOJI = ["🦙", "😀", "🙂", "👍", "🚀", "✅", "😁"]
PUNCT = [".", ",", "!", "?", ":", ";", "(", ")", "\"", "'", "-", "--", "...", "$", "%", "#", "=", "+"]


def training_lines(seed, n):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(3, 14)):
            r = rng.random()
            if r < 0.62:
                w = rng.choice(WORDS)
                if rng.random() < 0.15:
                    w = w.capitalize()
                if rng.random() < 0.03:
                    w = w.upper()
                parts.append(w)
            elif r < 0.72:
                parts.append(rng.choice(CONTRACTIONS))
            elif r < 0.80:
                parts.append(str(rng.choice([rng.randint(0, 9), rng.randint(10, 999), rng.randint(1000, 99999)])))
            elif r < 0.86:
                parts.append(rng.choice(CJK))
            elif r < 0.89:
                parts.append(rng.choice(EMOJI))
            else:
                parts.append(rng.choice(PUNCT))
        sep = rng.choice([" "] * 8 + ["  ", "\t", "   "])
        line = sep.join(parts)
        if rng.random() < 0.1:
            line = "    " + line
        lines.append(line)
    return lines


# ---------------------------------------------------------------------------------------
def make_spm():
    lines = training_lines(1, 4000)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "train.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        prefix = os.path.join(d, "spm")
        spm.SentencePieceTrainer.train(
            input=path,
            model_prefix=prefix,
            vocab_size=700,
            model_type="bpe",
            byte_fallback=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            add_dummy_prefix=True,
            allow_whitespace_only_pieces=True,
            split_digits=True,
            character_coverage=0.9995,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=-1,
            minloglevel=2,
        )
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    cases = []
    for text in CASES:
        ids = sp.encode(text)
        cases.append({"text": text, "ids": ids, "decoded": sp.decode(ids)})
    return {
        "source": "sentencepiece " + spm.__version__ + " BPE, byte_fallback, identity normalizer",
        "model": "llama",
        "pre": "default",
        "tokens": tokens,
        "scores": scores,
        "types": types,
        "merges": [],
        "bos": sp.bos_id(),
        "eos": sp.eos_id(),
        "unk": sp.unk_id(),
        "add_bos": True,
        "add_eos": False,
        "add_space_prefix": True,
        "ignore_merges": False,
        "cases": cases,
        "special_cases": [],
    }


LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEEPSEEK_LLM_PATTERNS = [
    r"[\r\n]",
    # Written with escapes where the characters change under Unicode normalization
    # (U+1F7D, U+1FD3, U+1FDB, U+1FBE, U+2126, U+212A).
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ"
    "Ὗ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳ"
    "Ꙁ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
    r"\s+$",
    r"[一-龥ࠀ-一가-퟿]+",
    r"\p{N}+",
]
DEEPSEEK_CODER_PATTERNS = [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"]
GPT2_NO_TRAILING = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"

# llama.cpp-only sequences (no tokenizer.json): golden from Python's `regex`.
LLAMACPP_SEQUENCES = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2_NO_TRAILING, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2_NO_TRAILING, r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2_NO_TRAILING],
    "bloom": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
}
HF_SEQUENCES = {
    "gpt-2": [GPT2_PATTERN],
    "llama-bpe": [LLAMA3_PATTERN],
    "qwen2": [QWEN2_PATTERN],
    "qwen35": [QWEN35_PATTERN],
    "tekken": [TEKKEN_PATTERN],
    "deepseek-llm": DEEPSEEK_LLM_PATTERNS,
    "deepseek-coder": DEEPSEEK_CODER_PATTERNS,
}


def make_bpe(pre_name, llama3):
    lines = training_lines(2 if llama3 else 3, 4000)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    model = models.BPE(ignore_merges=llama3)
    tok = Tokenizer(model)
    if llama3:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=900,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    spec = json.loads(tok.to_str())
    assert spec["model"].get("ignore_merges", False) == llama3
    vocab = spec["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    for added in spec["added_tokens"]:
        tokens[added["id"]] = added["content"]
    assert all(t is not None for t in tokens)
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    types = [3 if t in specials else 1 for t in tokens]
    cases = []
    for text in CASES:
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    special_cases = []
    for text in SPECIAL_CASES:
        special_cases.append({"text": text, "ids": tok.encode(text, add_special_tokens=False).ids})
    eot = tokens.index("<|endoftext|>")
    return {
        "source": "tokenizers BPE trained with " + ("Llama 3 Split regex" if llama3 else "GPT-2 ByteLevel"),
        "model": "gpt2",
        "pre": pre_name,
        "tokens": tokens,
        "scores": None,
        "types": types,
        "merges": merges,
        "bos": eot,
        "eos": eot,
        "unk": None,
        "add_bos": False,
        "add_eos": False,
        "add_space_prefix": False,
        "ignore_merges": llama3,
        "cases": cases,
        "special_cases": special_cases,
    }


# ---------------------------------------------------------------------------------------
ALPHABET = (
    list("abcXYZ sStTrReEvVmMlLdD'0123") + [" "] * 6 + ["\t", "\n", "\r", "\n", "  "] +
    list(".,!?-/\"()$+<=|`~^_") +
    ["é", "É", "ß", "ſ", "中", "文", "한", "ü", "Ω", "\u212a", "\u0301", "٣", "Ⅻ", "½", "\u00a0", "\u3000",
     "\u2028", "😀", "🙂", "ǅ", "ʰ", "…", "。", "，", "µ", "\u200b", "\u0085", "ー", "Ａ", "ｚ", "！", "‘", "İ"]
)


def random_strings(seed, n):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 18))) for _ in range(n)]


def hf_split(patterns, text):
    seq = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns]
    )
    return [w for w, _ in seq.pre_tokenize_str(text)]


def regex_split(patterns, text):
    pieces = [text] if text else []
    for p in patterns:
        compiled = regex.compile(p)
        out = []
        for piece in pieces:
            pos = 0
            for m in compiled.finditer(piece):
                if m.end() == m.start():
                    continue
                if m.start() > pos:
                    out.append(piece[pos:m.start()])
                out.append(m.group())
                pos = m.end()
            if pos < len(piece):
                out.append(piece[pos:])
        pieces = out
    return pieces


def make_pretokenizers():
    texts = CASES + random_strings(7, 160)
    result = {"texts": texts, "splits": {}}
    for name, patterns in HF_SEQUENCES.items():
        result["splits"][name] = [hf_split(patterns, t) for t in texts]
        # Python's `regex` agrees with Oniguruma on these patterns.
        for t, got in zip(texts, result["splits"][name]):
            assert regex_split(patterns, t) == got, (name, t)
    for name, patterns in LLAMACPP_SEQUENCES.items():
        result["splits"][name] = [regex_split(patterns, t) for t in texts]
    return result


def write(name, data):
    path = os.path.join(HERE, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    write("spm_bpe.json", make_spm())
    write("bpe_gpt2.json", make_bpe("gpt-2", llama3=False))
    write("bpe_llama3.json", make_bpe("llama-bpe", llama3=True))
    write("pretokenizers.json", make_pretokenizers())


if __name__ == "__main__":
    main()
