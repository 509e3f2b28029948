//! Vocabulary construction from GGUF metadata and plain parts: checks on inconsistent
//! metadata, special-token handling (user-defined vs control, strip attributes),
//! end-of-generation ids, decoding rules and the streaming decoder.

use proptest::prelude::*;
use tempra_llm::LlmError;
use tempra_llm::gguf::{Array, Metadata, TokenType, keys};
use tempra_llm::tokenizer::{
    DetokenizeOptions, PreTokenizer, TokenStreamDecoder, TokenizeOptions, TokenizerModel,
    VocabParts, Vocabulary,
};

/// A small SentencePiece vocabulary: specials, the 256 byte tokens, `▁`, letters and a
/// few merged pieces, plus the extra pieces given.
fn spm_parts(extra: &[(&str, f32, TokenType)]) -> VocabParts {
    let mut tokens: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
    let mut types = vec![TokenType::Unknown, TokenType::Control, TokenType::Control];
    let mut scores = vec![0.0; 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>").into_bytes());
        types.push(TokenType::Byte);
        scores.push(0.0);
    }
    let pieces = [
        "▁", "a", "b", "c", "h", "i", "e", "l", "o", "▁h", "▁hi", "he", "ll", "llo", "▁he",
        "▁hello",
    ];
    for (i, p) in pieces.iter().enumerate() {
        tokens.push(p.as_bytes().to_vec());
        types.push(TokenType::Normal);
        scores.push(-(i as f32));
    }
    for (t, s, ty) in extra {
        tokens.push(t.as_bytes().to_vec());
        types.push(*ty);
        scores.push(*s);
    }
    let mut parts = VocabParts::new(TokenizerModel::Spm, tokens);
    parts.scores = Some(scores);
    parts.token_types = Some(types);
    parts
}

fn spm(extra: &[(&str, f32, TokenType)]) -> Vocabulary {
    Vocabulary::from_parts(spm_parts(extra)).unwrap()
}

fn spm_metadata() -> Metadata {
    let mut md = Metadata::new();
    spm(&[]).write_gguf_metadata(&mut md);
    md
}

#[test]
fn gguf_metadata_round_trips() {
    let md = spm_metadata();
    let v = Vocabulary::from_gguf(&md).unwrap();
    assert_eq!(v.model(), TokenizerModel::Spm);
    assert_eq!(
        (v.bos(), v.eos(), v.special().unk),
        (Some(1), Some(2), Some(0))
    );
    assert!(v.add_bos() && !v.add_eos() && v.add_space_prefix());
    let ids = v.tokenize("hello hi", TokenizeOptions::default());
    assert_eq!(
        v.detokenize(&ids, DetokenizeOptions::default()).unwrap(),
        "hello hi"
    );
    assert_eq!(
        ids,
        spm(&[]).tokenize("hello hi", TokenizeOptions::default())
    );
}

#[test]
fn inconsistent_metadata_is_an_error() {
    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_SCORES, Array::F32(vec![0.0; 5]));
    let e = Vocabulary::from_gguf(&md).unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::VocabLength {
                key: "tokenizer.ggml.scores",
                found: 5,
                ..
            }
        ),
        "{e}"
    );

    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_TOKEN_TYPE, Array::I32(vec![1; 3]));
    assert!(matches!(
        Vocabulary::from_gguf(&md).unwrap_err(),
        LlmError::VocabLength { .. }
    ));

    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_MODEL, "t5");
    let e = Vocabulary::from_gguf(&md).unwrap_err();
    assert!(
        e.to_string().contains("tokenizer.ggml.model") && e.to_string().contains("`t5`"),
        "{e}"
    );

    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_MODEL, "gpt2");
    md.set(keys::TOKENIZER_MERGES, Array::String(vec![]));
    md.set(keys::TOKENIZER_PRE, "no-such-pre");
    let e = Vocabulary::from_gguf(&md).unwrap_err();
    assert!(
        e.to_string().contains("tokenizer.ggml.pre") && e.to_string().contains("no-such-pre"),
        "{e}"
    );

    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_MODEL, "gpt2");
    let e = Vocabulary::from_gguf(&md).unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.merges"), "{e}");

    let mut md = spm_metadata();
    md.set(
        keys::TOKENIZER_TOKEN_TYPE,
        Array::I32(vec![9; spm(&[]).len()]),
    );
    assert!(
        Vocabulary::from_gguf(&md)
            .unwrap_err()
            .to_string()
            .contains("token_type")
    );

    let mut md = spm_metadata();
    md.set(keys::TOKENIZER_TOKENS, Array::F32(vec![]));
    assert!(matches!(
        Vocabulary::from_gguf(&md).unwrap_err(),
        LlmError::KeyType { .. }
    ));

    let mut md = spm_metadata();
    md.remove(keys::TOKENIZER_TOKENS);
    assert!(matches!(
        Vocabulary::from_gguf(&md).unwrap_err(),
        LlmError::MissingKey { .. }
    ));

    let mut parts = spm_parts(&[]);
    parts.tokens[262] = b"a".to_vec();
    assert!(matches!(
        Vocabulary::from_parts(parts).unwrap_err(),
        LlmError::DuplicateToken { .. }
    ));

    let mut parts = spm_parts(&[]);
    parts.special.bos = None;
    let e = Vocabulary::from_parts(parts).unwrap_err();
    assert!(e.to_string().contains("add_bos_token"), "{e}");

    let mut parts = VocabParts::new(
        TokenizerModel::Bpe,
        vec![b"a".to_vec(), b"b".to_vec(), b"ab".to_vec()],
    );
    parts.merges = vec![b"ab".to_vec()];
    assert!(
        Vocabulary::from_parts(parts)
            .unwrap_err()
            .to_string()
            .contains("merge 0")
    );
}

#[test]
fn out_of_range_special_ids_in_gguf_are_ignored() {
    let mut md = spm_metadata();
    md.set("tokenizer.ggml.padding_token_id", 100_000u32);
    md.set("tokenizer.ggml.eos_token_id", -1i32);
    let v = Vocabulary::from_gguf(&md).unwrap();
    assert_eq!(v.special().pad, None);
    assert_eq!(v.eos(), Some(2), "the default stays");
}

#[test]
fn user_defined_tokens_always_match_control_tokens_only_when_parsed() {
    let v = spm(&[
        ("<sep>", 0.0, TokenType::UserDefined),
        ("<|im_end|>", 0.0, TokenType::Normal),
    ]);
    let sep = v.token_id(b"<sep>").unwrap();
    let im_end = v.token_id(b"<|im_end|>").unwrap();
    // `<|im_end|>` is made a control token and ends generation, like llama.cpp does.
    assert_eq!(v.token_type(im_end), Some(TokenType::Control));
    assert!(v.is_eog(im_end) && v.is_eog(2) && !v.is_eog(1));
    assert_eq!(v.special().eot, Some(im_end));

    let plain = v.tokenize("hi<sep>hi<|im_end|>", TokenizeOptions::PLAIN);
    assert!(plain.contains(&sep) && !plain.contains(&im_end));
    let parsed = v.tokenize(
        "hi<sep>hi<|im_end|>",
        TokenizeOptions {
            add_special: false,
            parse_special: true,
        },
    );
    assert!(parsed.contains(&sep) && parsed.ends_with(&[im_end]));
    // After a special token, SentencePiece text gets the space prefix again.
    let hi = v.tokenize("hi", TokenizeOptions::PLAIN);
    assert_eq!(parsed[..hi.len()], hi[..]);
    assert_eq!(parsed[hi.len() + 1..parsed.len() - 1], hi[..]);

    // Rendering: user-defined always, control only on request.
    let text = v.detokenize(&parsed, DetokenizeOptions::default()).unwrap();
    assert_eq!(text, "hi<sep> hi");
    let text = v
        .detokenize(
            &parsed,
            DetokenizeOptions {
                render_special: true,
                strip_leading_space: true,
            },
        )
        .unwrap();
    assert_eq!(text, "hi<sep> hi<|im_end|>");
}

#[test]
fn strip_attributes_take_ascii_whitespace() {
    let mut v = spm(&[("<x>", 0.0, TokenType::UserDefined)]);
    let x = v.token_id(b"<x>").unwrap();
    let without = v.tokenize("hi <x> hi", TokenizeOptions::PLAIN);
    v.set_token_strip(x, true, true);
    assert_eq!(v.token_strip(x), (true, true));
    let with = v.tokenize("hi \t<x>\n hi", TokenizeOptions::PLAIN);
    assert_ne!(with, without);
    assert_eq!(with, v.tokenize("hi<x>hi", TokenizeOptions::PLAIN));
}

#[test]
fn phi3_models_rstrip_special_tokens() {
    let mut md = Metadata::new();
    spm(&[
        ("<|end|>", 0.0, TokenType::Control),
        ("<|user|>", 0.0, TokenType::Control),
    ])
    .write_gguf_metadata(&mut md);
    md.set(keys::GENERAL_NAME, "Phi-3 mini");
    let v = Vocabulary::from_gguf(&md).unwrap();
    let user = v.token_id(b"<|user|>").unwrap();
    assert_eq!(v.token_strip(user), (false, true));
    assert_eq!(v.token_strip(1), (false, false), "<s> keeps its whitespace");
    assert_eq!(v.token_strip(2), (false, true), "</s> strips");
}

#[test]
fn decoding_rules() {
    let v = spm(&[]);
    let hello = v.token_id("▁hello".as_bytes()).unwrap();
    let mark = v.token_id("▁".as_bytes()).unwrap();
    // The first rendered normal piece loses one space; control tokens do not count.
    assert_eq!(
        v.detokenize(&[1, hello, hello], DetokenizeOptions::default())
            .unwrap(),
        "hello hello"
    );
    assert_eq!(
        v.detokenize(&[1, mark, hello], DetokenizeOptions::default())
            .unwrap(),
        " hello"
    );
    let keep = DetokenizeOptions {
        strip_leading_space: false,
        ..Default::default()
    };
    assert_eq!(v.detokenize(&[hello], keep).unwrap(), " hello");
    // A byte token renders its byte and counts as the first piece (as in SentencePiece).
    assert_eq!(
        v.detokenize(&[3 + 0x20, hello], DetokenizeOptions::default())
            .unwrap(),
        "  hello"
    );
    // Lone bytes of a split character become U+FFFD; an unknown id is an error.
    assert_eq!(
        v.detokenize(&[3 + 0xE2, 3 + 0x82], DetokenizeOptions::default())
            .unwrap(),
        "\u{FFFD}"
    );
    assert!(matches!(
        v.detokenize(&[9999], DetokenizeOptions::default()),
        Err(LlmError::TokenId { id: 9999, .. })
    ));
    // Byte fallback for characters that are not tokens.
    let ids = v.tokenize("h€", TokenizeOptions::PLAIN);
    assert_eq!(&ids[ids.len() - 3..], [3 + 0xE2, 3 + 0x82, 3 + 0xAC]);
    assert_eq!(
        v.detokenize(&ids, DetokenizeOptions::default()).unwrap(),
        "h€"
    );
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let v = spm(&[]);
    let mut s = TokenStreamDecoder::new(DetokenizeOptions::default());
    assert_eq!(s.push(&v, 1).unwrap(), "");
    assert_eq!(
        s.push(&v, v.token_id("▁hello".as_bytes()).unwrap())
            .unwrap(),
        "hello"
    );
    assert_eq!(s.push(&v, 3 + 0xF0).unwrap(), "");
    assert_eq!(s.push(&v, 3 + 0x9F).unwrap(), "");
    assert!(s.has_pending());
    assert_eq!(s.push(&v, 3 + 0x99).unwrap(), "");
    assert_eq!(s.push(&v, 3 + 0x82).unwrap(), "🙂");
    // An impossible continuation: U+FFFD, then the rest.
    assert_eq!(s.push(&v, 3 + 0xE2).unwrap(), "");
    assert_eq!(s.push(&v, 3 + b'a' as u32).unwrap(), "\u{FFFD}a");
    assert!(s.push(&v, 100_000).is_err());
    assert_eq!(s.push(&v, 3 + 0xC3).unwrap(), "");
    assert_eq!(s.finish(), "\u{FFFD}");
    assert!(!s.has_pending());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Streaming any id sequence gives exactly the whole-sequence (lossy) decoding.
    #[test]
    fn stream_equals_whole_decode(ids in prop::collection::vec(0u32..275, 0..40)) {
        let v = spm(&[]);
        let mut s = TokenStreamDecoder::new(DetokenizeOptions::default());
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(s.push(&v, id).unwrap());
        }
        streamed.push_str(s.finish());
        prop_assert_eq!(streamed, v.detokenize(&ids, DetokenizeOptions::default()).unwrap());
    }

    /// SentencePiece tokenization round-trips any text (byte fallback covers the rest),
    /// including vocabularies with pieces that span word boundaries.
    #[test]
    fn spm_round_trips(text in "[ a-eh-lo\\t\\n€é🙂.]{0,40}") {
        let v = spm(&[("o▁h", -0.5, TokenType::Normal), ("▁▁", -0.2, TokenType::Normal), (".▁", -3.0, TokenType::Normal)]);
        let ids = v.tokenize(&text, TokenizeOptions::default());
        prop_assert_eq!(v.detokenize(&ids, DetokenizeOptions::default()).unwrap(), text);
    }
}

#[test]
fn byte_level_bpe_with_special_tokens() {
    // 256 byte spellings, a few merges, and an added control token.
    let mut byte_chars = Vec::new();
    let mut next = 0x100u32;
    for b in 0..=255u32 {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        byte_chars.push(char::from_u32(if printable { b } else { next }).unwrap());
        if !printable {
            next += 1;
        }
    }
    let mut tokens: Vec<Vec<u8>> = byte_chars
        .iter()
        .map(|c| c.to_string().into_bytes())
        .collect();
    for t in ["he", "Ġhe", "ll", "llo", "hello", "<|endoftext|>"] {
        tokens.push(t.as_bytes().to_vec());
    }
    let mut parts = VocabParts::new(TokenizerModel::Bpe, tokens);
    parts.pre = PreTokenizer::Gpt2;
    parts.merges = ["h e", "Ġ he", "l l", "ll o", "he llo"]
        .iter()
        .map(|m| m.as_bytes().to_vec())
        .collect();
    let v = Vocabulary::from_parts(parts).unwrap();
    let eot = v.token_id(b"<|endoftext|>").unwrap();
    assert_eq!(v.token_type(eot), Some(TokenType::Control));
    assert_eq!(v.special().eot, Some(eot));
    assert!(v.is_eog(eot));
    let ids = v.tokenize(
        "hello he<|endoftext|>",
        TokenizeOptions {
            add_special: false,
            parse_special: true,
        },
    );
    assert_eq!(
        ids,
        [
            v.token_id(b"hello").unwrap(),
            v.token_id("Ġhe".as_bytes()).unwrap(),
            eot
        ]
    );
    let plain = v.tokenize("hello he<|endoftext|>", TokenizeOptions::PLAIN);
    assert!(!plain.contains(&eot));
    assert_eq!(
        v.detokenize(&plain, DetokenizeOptions::default()).unwrap(),
        "hello he<|endoftext|>"
    );
    assert_eq!(v.merge_count(), 5);
    // Round trip through GGUF metadata keeps the merges.
    let mut md = Metadata::new();
    v.write_gguf_metadata(&mut md);
    let back = Vocabulary::from_gguf(&md).unwrap();
    assert_eq!(back.pre_tokenizer(), PreTokenizer::Gpt2);
    assert_eq!(
        back.tokenize("hello hello", TokenizeOptions::PLAIN),
        v.tokenize("hello hello", TokenizeOptions::PLAIN)
    );
}

/// Gemma 4 (`tokenizer.ggml.model = gemma4`): spaces become `▁`, the merges run over raw
/// UTF-8 characters within runs split at newlines, a newline run that is a token is
/// taken whole, a character that is no token falls back to `<0xXX>`; and it reads the
/// same from GGUF metadata and round-trips through it.
#[test]
fn gemma4_merges_raw_characters_with_byte_fallback() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8)
        .map(|b| format!("<0x{b:02X}>").into_bytes())
        .collect();
    let mut types = vec![TokenType::Byte; 256];
    for t in ["▁", "h", "i", "▁h", "▁hi", "\n", "\n\n"] {
        tokens.push(t.as_bytes().to_vec());
        types.push(TokenType::Normal);
    }
    let id = |t: &str| {
        256 + ["▁", "h", "i", "▁h", "▁hi", "\n", "\n\n"]
            .iter()
            .position(|x| *x == t)
            .unwrap() as u32
    };
    let mut parts = VocabParts::new(TokenizerModel::Bpe, tokens);
    parts.pre = PreTokenizer::Gemma4;
    parts.token_types = Some(types);
    parts.merges = vec!["▁ h".as_bytes().to_vec(), "▁h i".as_bytes().to_vec()];
    let vocab = Vocabulary::from_parts(parts).unwrap();
    let text = "hi hi\n\né";
    let expected = [id("h"), id("i"), id("▁hi"), id("\n\n"), 0xC3, 0xA9];
    assert_eq!(vocab.tokenize(text, TokenizeOptions::PLAIN), expected);
    assert_eq!(
        vocab
            .detokenize(&expected, DetokenizeOptions::default())
            .unwrap(),
        text
    );

    let mut md = Metadata::new();
    vocab.write_gguf_metadata(&mut md);
    let back = Vocabulary::from_gguf(&md).unwrap();
    assert_eq!(back.pre_tokenizer(), PreTokenizer::Gemma4);
    assert_eq!(back.tokenize(text, TokenizeOptions::PLAIN), expected);
    md.set(keys::TOKENIZER_MODEL, "gemma4");
    md.set(keys::TOKENIZER_PRE, "default");
    let named = Vocabulary::from_gguf(&md).unwrap();
    assert_eq!(named.pre_tokenizer(), PreTokenizer::Gemma4);
    assert_eq!(named.tokenize(text, TokenizeOptions::PLAIN), expected);
}
