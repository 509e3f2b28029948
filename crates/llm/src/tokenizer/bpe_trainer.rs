//! Training a byte-level BPE vocabulary (GPT-2 style) on a corpus: the pre-tokenizer
//! splits texts into words, every word starts as its bytes, and the most frequent
//! adjacent pair is merged into a new token until the vocabulary is full.

use std::collections::HashMap;

use crate::error::{LlmError, Result};
use crate::gguf::TokenType;

use super::byte_level::encode_into;
use super::pre_tokenizer::PreTokenizer;
use super::vocabulary::{SpecialTokens, TokenId, TokenizerModel, VocabParts, Vocabulary};

/// Settings of [`train_byte_level_bpe`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpeTrainerConfig {
    /// The vocabulary size to reach: 256 byte tokens, the merges, then the end-of-text
    /// token. Training stops earlier when no pair occurs twice.
    pub vocab_size: usize,
    /// How texts are split into words (merges never cross a word boundary).
    pub pre: PreTokenizer,
    /// The end-of-text control token (the last id; BOS and EOS of the vocabulary).
    pub end_of_text: String,
}

impl Default for BpeTrainerConfig {
    /// 1024 tokens, the GPT-2 pre-tokenizer, `<|endoftext|>`.
    fn default() -> Self {
        Self {
            vocab_size: 1024,
            pre: PreTokenizer::Gpt2,
            end_of_text: "<|endoftext|>".into(),
        }
    }
}

/// One distinct word: its current token ids and how often it occurs.
struct Word {
    ids: Vec<TokenId>,
    count: u64,
}

/// Trains a byte-level BPE vocabulary on `texts` (each split by `config.pre`).
///
/// Token ids: 0..=255 are the bytes (spelled with GPT-2's byte-to-unicode mapping), then
/// one token per merge in rank order, then the end-of-text token (a control token used
/// as BOS and EOS; tokenizing with special tokens adds BOS). Among pairs of equal
/// frequency the one with the smaller ids merges first, so training is deterministic.
/// Training stops early, with a smaller vocabulary, when no pair occurs twice.
///
/// Errors: a `vocab_size` below 257 (the bytes plus end of text) is an
/// [`LlmError::Argument`].
///
/// ```
/// use tempra_llm::tokenizer::{BpeTrainerConfig, TokenizeOptions, train_byte_level_bpe};
///
/// let config = BpeTrainerConfig { vocab_size: 270, ..BpeTrainerConfig::default() };
/// let vocab = train_byte_level_bpe(["the cat and the hat", "the bat"], &config)?;
/// // Bytes, the merges of pairs seen at least twice (at most 13 here), end of text.
/// assert!(vocab.len() > 257 && vocab.len() <= 270);
/// let ids = vocab.tokenize("the hat", TokenizeOptions::PLAIN);
/// assert!(ids.len() < "the hat".len());
/// assert_eq!(vocab.detokenize(&ids, Default::default())?, "the hat");
/// # Ok::<(), tempra_llm::LlmError>(())
/// ```
pub fn train_byte_level_bpe<'a>(
    texts: impl IntoIterator<Item = &'a str>,
    config: &BpeTrainerConfig,
) -> Result<Vocabulary> {
    if config.vocab_size < 257 {
        return Err(LlmError::Argument {
            what: format!(
                "a byte-level BPE vocabulary needs at least 257 tokens (256 bytes and end of text), not {}",
                config.vocab_size
            ),
        });
    }
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for text in texts {
        config.pre.split(text, &mut |a, b| {
            *counts.entry(&text[a..b]).or_insert(0) += 1
        });
    }
    let mut words: Vec<Word> = counts
        .into_iter()
        .map(|(w, count)| Word {
            ids: w.bytes().map(TokenId::from).collect(),
            count,
        })
        .collect();
    // Deterministic order, whatever the hash map's.
    words.sort_unstable_by(|a, b| a.ids.cmp(&b.ids));

    let mut token_bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut merges: Vec<(TokenId, TokenId)> = Vec::new();
    let max_merges = config.vocab_size - 257;
    let mut pairs: HashMap<(TokenId, TokenId), u64> = HashMap::new();
    while merges.len() < max_merges {
        pairs.clear();
        for w in &words {
            for p in w.ids.windows(2) {
                *pairs.entry((p[0], p[1])).or_insert(0) += w.count;
            }
        }
        let best = pairs
            .iter()
            .filter(|&(_, &c)| c >= 2)
            .max_by(|(pa, ca), (pb, cb)| ca.cmp(cb).then(pb.cmp(pa)));
        let Some((&(left, right), _)) = best else {
            break;
        };
        let new_id = token_bytes.len() as TokenId;
        let mut bytes = token_bytes[left as usize].clone();
        bytes.extend_from_slice(&token_bytes[right as usize]);
        token_bytes.push(bytes);
        merges.push((left, right));
        for w in &mut words {
            merge_pair(&mut w.ids, left, right, new_id);
        }
    }

    let spell = |bytes: &[u8]| {
        let mut s = String::new();
        encode_into(bytes, &mut s);
        s.into_bytes()
    };
    let mut tokens: Vec<Vec<u8>> = token_bytes.iter().map(|b| spell(b)).collect();
    let merge_lines = merges
        .iter()
        .map(|&(l, r)| {
            let mut line = tokens[l as usize].clone();
            line.push(b' ');
            line.extend_from_slice(&tokens[r as usize]);
            line
        })
        .collect();
    let eot = tokens.len() as TokenId;
    tokens.push(config.end_of_text.as_bytes().to_vec());
    let mut types = vec![TokenType::Normal; tokens.len()];
    types[eot as usize] = TokenType::Control;
    let mut parts = VocabParts::new(TokenizerModel::Bpe, tokens);
    parts.pre = config.pre;
    parts.merges = merge_lines;
    parts.token_types = Some(types);
    parts.special = SpecialTokens {
        bos: Some(eot),
        eos: Some(eot),
        ..SpecialTokens::default()
    };
    parts.add_bos = true;
    Vocabulary::from_parts(parts)
}

/// Replaces every non-overlapping `left right` in `ids`, left to right, by `new_id`.
fn merge_pair(ids: &mut Vec<TokenId>, left: TokenId, right: TokenId, new_id: TokenId) {
    if ids.len() < 2 {
        return;
    }
    let mut out = 0;
    let mut i = 0;
    while i < ids.len() {
        if i + 1 < ids.len() && ids[i] == left && ids[i + 1] == right {
            ids[out] = new_id;
            i += 2;
        } else {
            ids[out] = ids[i];
            i += 1;
        }
        out += 1;
    }
    ids.truncate(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_pair_is_left_to_right_and_non_overlapping() {
        let mut ids = vec![1, 1, 1, 2, 1, 1];
        merge_pair(&mut ids, 1, 1, 9);
        assert_eq!(ids, [9, 1, 2, 9]);
    }
}
