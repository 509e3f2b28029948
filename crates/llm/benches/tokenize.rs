//! Tokenizer throughput on 1 MB of English-like text: SentencePiece with a 32k
//! vocabulary (`testing::SyntheticVocab`) and byte-level BPE (Llama 3 and GPT-2
//! pre-tokenizers) with a synthetic 32k vocabulary of merge chains.
//!
//! `cargo bench -p tempra-llm --no-default-features --bench tokenize`; with
//! `TEMPRA_VOCAB_DIR` set to a folder of llama.cpp's `ggml-vocab-*.gguf` files, also
//! every real vocabulary that `tests/tokenizer_llama_cpp_vocabs.rs` checks (Llama 2/3,
//! Phi-3, Qwen2/3.5, GPT-2, MPT, Falcon, StarCoder, Refact, Command-R, DeepSeek,
//! Gemma 4); `crates/llm/scripts/fetch_llama_cpp_vocabs.py DIR` fetches them.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tempra_llm::gguf::Metadata;
use tempra_llm::testing::SyntheticVocab;
use tempra_llm::tokenizer::{
    DetokenizeOptions, PreTokenizer, TokenizeOptions, TokenizerModel, VocabParts, Vocabulary,
};

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "you",
    "that",
    "it",
    "he",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "I",
    "at",
    "be",
    "this",
    "have",
    "from",
    "or",
    "one",
    "had",
    "by",
    "word",
    "but",
    "not",
    "what",
    "all",
    "were",
    "we",
    "when",
    "your",
    "can",
    "said",
    "there",
    "use",
    "an",
    "each",
    "which",
    "she",
    "do",
    "how",
    "their",
    "if",
    "will",
    "up",
    "other",
    "about",
    "out",
    "many",
    "then",
    "them",
    "these",
    "so",
    "some",
    "her",
    "would",
    "make",
    "like",
    "him",
    "into",
    "time",
    "has",
    "look",
    "two",
    "more",
    "write",
    "go",
    "see",
    "number",
    "no",
    "way",
    "could",
    "people",
    "my",
    "than",
    "first",
    "water",
    "been",
    "call",
    "who",
    "oil",
    "its",
    "now",
    "find",
    "long",
    "down",
    "day",
    "did",
    "get",
    "come",
    "made",
    "may",
    "part",
    "Lily",
    "park",
    "little",
    "girl",
    "tokenizer",
    "memory",
    "buffer",
    "recycled",
    "weights",
    "don't",
    "it's",
    "we'll",
    "1984",
    "42",
    "3.14",
    "beautiful",
    "understanding",
    "government",
    "international",
    "yesterday",
    "everything",
    "question",
];

/// About `bytes` of English-like text: sentences of common words, punctuation,
/// paragraphs (fixed seed).
fn english_text(bytes: usize) -> String {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut text = String::with_capacity(bytes + 64);
    while text.len() < bytes {
        let words = 6 + next(14);
        for i in 0..words {
            // Zipf-like: favour the first words.
            let bound = next(WORDS.len()) + 1;
            let w = WORDS[next(bound)];
            if i == 0 {
                let mut c = w.chars();
                text.extend(c.next().map(|f| f.to_ascii_uppercase()));
                text.push_str(c.as_str());
            } else {
                text.push(' ');
                text.push_str(w);
            }
            if i + 1 < words && next(12) == 0 {
                text.push(',');
            }
        }
        text.push_str([".", ".", ".", "!", "?"][next(5)]);
        text.push_str(if next(6) == 0 { "\n\n" } else { " " });
    }
    text
}

fn spm_vocab() -> Vocabulary {
    let mut md = Metadata::new();
    SyntheticVocab::new(32_000).unwrap().write_metadata(&mut md);
    Vocabulary::from_gguf(&md).unwrap()
}

/// A byte-level BPE vocabulary: the 256 byte spellings, then the prefixes of frequent
/// words (with and without a leading space) as merge chains, up to `size` tokens.
fn bpe_vocab(pre: PreTokenizer, size: usize) -> Vocabulary {
    // GPT-2's byte-to-unicode spelling.
    let mut byte_chars = ['\0'; 256];
    let mut next = 0x100u32;
    for (b, slot) in byte_chars.iter_mut().enumerate() {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        *slot = char::from_u32(if printable { b as u32 } else { next }).unwrap();
        if !printable {
            next += 1;
        }
    }
    let spell = |s: &str| {
        s.bytes()
            .map(|b| byte_chars[b as usize])
            .collect::<String>()
    };
    let mut tokens: Vec<String> = byte_chars.iter().map(|c| c.to_string()).collect();
    let mut seen: std::collections::HashSet<String> = tokens.iter().cloned().collect();
    let mut merges = Vec::new();
    let text = english_text(200_000);
    let mut words: Vec<String> = PreTokenizer::Gpt2
        .words(&text)
        .into_iter()
        .map(spell)
        .collect();
    words.sort();
    words.dedup();
    'outer: for len in 2.. {
        let mut grew = false;
        for w in &words {
            let chars: Vec<char> = w.chars().collect();
            if chars.len() < len {
                continue;
            }
            grew = true;
            let left: String = chars[..len - 1].iter().collect();
            let right = chars[len - 1].to_string();
            let full = format!("{left}{right}");
            if seen.insert(full.clone()) {
                merges.push(format!("{left} {right}").into_bytes());
                tokens.push(full);
                if tokens.len() >= size {
                    break 'outer;
                }
            }
        }
        if !grew {
            break;
        }
    }
    let mut parts = VocabParts::new(
        TokenizerModel::Bpe,
        tokens.into_iter().map(String::into_bytes).collect(),
    );
    parts.pre = pre;
    parts.merges = merges;
    parts.ignore_merges = pre == PreTokenizer::Llama3;
    Vocabulary::from_parts(parts).unwrap()
}

fn bench_tokenize(c: &mut Criterion) {
    let text = english_text(1 << 20);
    let mut group = c.benchmark_group("tokenize_1MiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(text.len() as u64));
    let spm = spm_vocab();
    group.bench_function("spm_32k", |b| {
        b.iter(|| black_box(spm.tokenize(black_box(&text), TokenizeOptions::PLAIN)))
    });
    for (name, pre) in [
        ("bpe_llama3", PreTokenizer::Llama3),
        ("bpe_gpt2", PreTokenizer::Gpt2),
    ] {
        let vocab = bpe_vocab(pre, 32_000);
        group.bench_function(name, |b| {
            b.iter(|| black_box(vocab.tokenize(black_box(&text), TokenizeOptions::PLAIN)))
        });
    }
    // Real vocabularies: llama.cpp's ggml-vocab-*.gguf files, when TEMPRA_VOCAB_DIR
    // points at them (see tests/tokenizer_llama_cpp_vocabs.rs).
    if let Some(dir) = std::env::var_os("TEMPRA_VOCAB_DIR") {
        for name in [
            "llama-spm",
            "phi-3",
            "llama-bpe",
            "qwen2",
            "qwen35",
            "gpt-2",
            "mpt",
            "falcon",
            "starcoder",
            "refact",
            "command-r",
            "deepseek-llm",
            "deepseek-coder",
            "gemma-4",
        ] {
            let path = std::path::Path::new(&dir).join(format!("ggml-vocab-{name}.gguf"));
            let Ok(model) = tempra_llm::ModelFile::open(&path) else {
                eprintln!("skipping vocab_{name}: cannot open {}", path.display());
                continue;
            };
            let vocab = Vocabulary::from_gguf(model.metadata()).unwrap();
            group.bench_function(format!("vocab_{name}"), |b| {
                b.iter(|| black_box(vocab.tokenize(black_box(&text), TokenizeOptions::PLAIN)))
            });
        }
    }
    let ids = spm.tokenize(&text, TokenizeOptions::PLAIN);
    group.bench_function("spm_32k_detokenize", |b| {
        b.iter(|| {
            black_box(
                spm.detokenize(black_box(&ids), DetokenizeOptions::default())
                    .unwrap(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench_tokenize);
criterion_main!(benches);
