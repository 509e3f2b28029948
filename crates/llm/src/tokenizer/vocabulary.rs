//! `Vocabulary`: the tokens of a model (text, score, type), its special ids and flags,
//! and the lookups the tokenizers need, built from plain parts ([`VocabParts`]), from
//! GGUF metadata or from a llama2.c tokenizer file.

use crate::error::{LlmError, Result};
use crate::gguf::TokenType;
use crate::gguf::keys;

use super::byte_level;
use super::merges::Merges;
use super::pre_tokenizer::PreTokenizer;
use super::token_table::{TableError, TokenTable};

/// A token id: an index into the vocabulary.
pub type TokenId = u32;

/// The tokenization algorithm of a vocabulary (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenizerModel {
    /// SentencePiece-style BPE over characters with scores, `▁` for spaces and byte
    /// fallback (`llama`: Llama 1/2, Mistral, TinyLlama, Gemma, Phi-3, llama2.c).
    Spm,
    /// Byte-level BPE with ranked merges and a regex pre-tokenizer (`gpt2`: GPT-2,
    /// Llama 3, Qwen2, ...).
    Bpe,
    /// WordPiece: BERT's normalizer, punctuation splitting and greedy longest-match
    /// word pieces (`bert`: BERT, BGE and other encoders).
    Wpm,
}

impl TokenizerModel {
    /// The model a `tokenizer.ggml.model` value names, or `None` when tempra does not
    /// implement it.
    pub fn from_gguf_name(name: &str) -> Option<TokenizerModel> {
        match name {
            "llama" => Some(TokenizerModel::Spm),
            "gpt2" => Some(TokenizerModel::Bpe),
            "bert" => Some(TokenizerModel::Wpm),
            _ => None,
        }
    }

    /// The `tokenizer.ggml.model` value.
    pub fn gguf_name(self) -> &'static str {
        match self {
            TokenizerModel::Spm => "llama",
            TokenizerModel::Bpe => "gpt2",
            TokenizerModel::Wpm => "bert",
        }
    }
}

/// The special token ids of a vocabulary (`None` where the vocabulary has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<TokenId>,
    /// End of sequence.
    pub eos: Option<TokenId>,
    /// The unknown token.
    pub unk: Option<TokenId>,
    /// Padding.
    pub pad: Option<TokenId>,
    /// Separator.
    pub sep: Option<TokenId>,
    /// End of turn (`<|eot_id|>`, `<|im_end|>`, `<end_of_turn>`, ...).
    pub eot: Option<TokenId>,
    /// End of message (`<|eom_id|>`).
    pub eom: Option<TokenId>,
}

/// The plain inputs of a [`Vocabulary`]: what GGUF metadata (or any other source)
/// describes. [`VocabParts::new`] fills the defaults llama.cpp uses for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct VocabParts {
    /// The algorithm.
    pub model: TokenizerModel,
    /// The pre-tokenizer (byte-level BPE only; ignored for SentencePiece).
    pub pre: PreTokenizer,
    /// Each token's text (SentencePiece: `▁` for spaces, `<0x41>` byte tokens;
    /// byte-level BPE: GPT-2's byte-to-unicode spelling, added tokens as plain text).
    pub tokens: Vec<Vec<u8>>,
    /// One score per token (SentencePiece merge priority); `None`: all 0.
    pub scores: Option<Vec<f32>>,
    /// One type per token; `None`: all [`TokenType::Normal`].
    pub token_types: Option<Vec<TokenType>>,
    /// Byte-level BPE merges, `"left right"`, highest priority first.
    pub merges: Vec<Vec<u8>>,
    /// Special token ids.
    pub special: SpecialTokens,
    /// Whether tokenizing with special tokens adds BOS.
    pub add_bos: bool,
    /// Whether tokenizing with special tokens adds EOS.
    pub add_eos: bool,
    /// Whether SentencePiece text gets a leading space (`▁`) before tokenizing, and the
    /// first decoded piece loses it.
    pub add_space_prefix: bool,
    /// Whether a byte-level BPE word that is itself a token skips the merges (Llama 3,
    /// Tekken).
    pub ignore_merges: bool,
    /// WordPiece: whether text is lowercased before matching.
    pub lowercase: bool,
    /// WordPiece: whether text is NFD-decomposed and its marks (accents) dropped.
    pub strip_accents: bool,
}

impl VocabParts {
    /// Parts with llama.cpp's defaults for `model`: SentencePiece has BOS 1, EOS 2,
    /// UNK 0 (where the vocabulary is that large), adds BOS and a space prefix;
    /// byte-level BPE has no special ids and adds nothing; WordPiece has BERT's ids
    /// (`[PAD]` 0, `[UNK]` 100, `[CLS]` 101 as BOS, `[SEP]` 102 as separator and EOS),
    /// adds BOS and EOS (`[CLS] text [SEP]`), lowercases and strips accents. No scores,
    /// types or merges.
    pub fn new(model: TokenizerModel, tokens: Vec<Vec<u8>>) -> VocabParts {
        let n = tokens.len() as u64;
        let in_range = |id: TokenId| (u64::from(id) < n).then_some(id);
        let (special, add_bos, add_eos, add_space_prefix) = match model {
            TokenizerModel::Spm => (
                SpecialTokens {
                    bos: in_range(1),
                    eos: in_range(2),
                    unk: in_range(0),
                    ..SpecialTokens::default()
                },
                in_range(1).is_some(),
                false,
                true,
            ),
            TokenizerModel::Bpe => (SpecialTokens::default(), false, false, false),
            TokenizerModel::Wpm => (
                SpecialTokens {
                    bos: in_range(101),
                    eos: in_range(102),
                    unk: in_range(100),
                    pad: in_range(0),
                    sep: in_range(102),
                    ..SpecialTokens::default()
                },
                in_range(101).is_some(),
                in_range(102).is_some(),
                false,
            ),
        };
        VocabParts {
            model,
            pre: PreTokenizer::Default,
            tokens,
            scores: None,
            token_types: None,
            merges: Vec::new(),
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            ignore_merges: false,
            lowercase: true,
            strip_accents: true,
        }
    }
}

/// Token attribute bit: strip ASCII whitespace left of the token when matching it in
/// text.
const ATTR_LSTRIP: u8 = 1;
/// Token attribute bit: strip ASCII whitespace right of the token.
const ATTR_RSTRIP: u8 = 2;

/// A model's vocabulary and everything needed to tokenize and detokenize with it.
///
/// Build it with [`Vocabulary::from_parts`], [`Vocabulary::from_gguf`] or
/// [`Vocabulary::from_llama2c`]; tokenize with [`Vocabulary::tokenize`]; turn ids back
/// into text with [`Vocabulary::detokenize`] or, token by token,
/// [`super::TokenStreamDecoder`].
#[derive(Clone, Debug)]
pub struct Vocabulary {
    pub(crate) model: TokenizerModel,
    pub(crate) pre: PreTokenizer,
    pub(crate) table: TokenTable,
    pub(crate) scores: Vec<f32>,
    pub(crate) types: Vec<TokenType>,
    pub(crate) attrs: Vec<u8>,
    pub(crate) special: SpecialTokens,
    pub(crate) add_bos: bool,
    pub(crate) add_eos: bool,
    pub(crate) add_space_prefix: bool,
    pub(crate) ignore_merges: bool,
    /// End-of-generation ids, sorted.
    pub(crate) eog: Vec<TokenId>,
    /// SentencePiece: the `<0xXX>` token (else the one-byte token) of each byte.
    /// Byte-level BPE: the token spelling each byte (Gemma 4: its `<0xXX>` token).
    pub(crate) byte_tokens: [Option<TokenId>; 256],
    pub(crate) merges: Merges,
    /// Control, user-defined and unknown tokens with non-empty UTF-8 text, longest
    /// first (ties: lower id first): the ones matched in text before tokenizing.
    pub(crate) special_cache: Vec<TokenId>,
    /// SentencePiece: every character that some token has immediately before a `▁`
    /// (UTF-8, sorted): where a word boundary can be merged across.
    pub(crate) spm_mark_joiners: Vec<Box<[u8]>>,
    /// WordPiece: lowercase the text.
    pub(crate) wpm_lowercase: bool,
    /// WordPiece: NFD-decompose the text and drop its marks.
    pub(crate) wpm_strip_accents: bool,
    /// The longest token text, in bytes (WordPiece's longest possible match).
    pub(crate) max_token_len: usize,
}

/// Token texts llama.cpp takes as the end-of-turn token when `eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Token texts that end generation (llama.cpp's list); they are made control tokens.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
];

/// Fill-in-the-middle token texts: made control tokens; the pad, repo and file
/// separator ones also end generation.
const FIM_TEXTS: &[(&str, bool)] = &[
    ("<|fim_prefix|>", false),
    ("<fim-prefix>", false),
    ("<fim_prefix>", false),
    ("<｜fim▁begin｜>", false),
    ("<PRE>", false),
    ("▁<PRE>", false),
    ("<|fim_suffix|>", false),
    ("<fim-suffix>", false),
    ("<fim_suffix>", false),
    ("<｜fim▁hole｜>", false),
    ("<SUF>", false),
    ("▁<SUF>", false),
    ("<|fim_middle|>", false),
    ("<fim-middle>", false),
    ("<fim_middle>", false),
    ("<｜fim▁end｜>", false),
    ("<MID>", false),
    ("▁<MID>", false),
    ("<|fim_pad|>", true),
    ("<fim-pad>", true),
    ("<fim_pad>", true),
    ("<|fim_repo|>", true),
    ("<|repo_name|>", true),
    ("<fim-repo>", true),
    ("<REPO>", true),
    ("<reponame>", true),
    ("<|file_sep|>", true),
];

impl Vocabulary {
    /// Builds a vocabulary from plain parts, checking them: scores and types must have
    /// one entry per token, special ids must be in range, texts must be unique, merges
    /// must be `"left right"`, and a vocabulary that adds BOS or EOS must have one.
    ///
    /// Like llama.cpp, tokens whose text marks the end of a turn (`<|eot_id|>`,
    /// `<|im_end|>`, `<end_of_turn>`, `<|endoftext|>`, ...) become control tokens and
    /// end generation; the first of them is the EOT id when `special.eot` is `None`.
    ///
    /// ```
    /// use tempra_llm::tokenizer::{TokenType, TokenizeOptions, TokenizerModel, VocabParts, Vocabulary};
    ///
    /// let tokens = ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"];
    /// let mut parts = VocabParts::new(TokenizerModel::Spm, tokens.iter().map(|t| t.as_bytes().to_vec()).collect());
    /// parts.scores = Some(vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -0.5, -0.1]);
    /// let mut types = vec![TokenType::Normal; tokens.len()];
    /// types[..3].copy_from_slice(&[TokenType::Unknown, TokenType::Control, TokenType::Control]);
    /// parts.token_types = Some(types);
    /// let vocab = Vocabulary::from_parts(parts)?;
    /// assert_eq!(vocab.tokenize("hi", TokenizeOptions::default()), [1, 7]);
    /// assert_eq!(vocab.detokenize(&[1, 7], Default::default())?, "hi");
    /// # Ok::<(), tempra_llm::LlmError>(())
    /// ```
    pub fn from_parts(parts: VocabParts) -> Result<Vocabulary> {
        let n = parts.tokens.len();
        if n == 0 {
            return Err(LlmError::InvalidValue {
                key: keys::TOKENIZER_TOKENS.to_string(),
                what: "the vocabulary has no tokens".to_string(),
            });
        }
        let scores = match parts.scores {
            Some(s) if s.len() != n => {
                return Err(LlmError::VocabLength {
                    key: keys::TOKENIZER_SCORES,
                    found: s.len(),
                    expected: n,
                });
            }
            Some(s) => s,
            None => vec![0.0; n],
        };
        let mut types = match parts.token_types {
            Some(t) if t.len() != n => {
                return Err(LlmError::VocabLength {
                    key: keys::TOKENIZER_TOKEN_TYPE,
                    found: t.len(),
                    expected: n,
                });
            }
            Some(t) => t,
            None => vec![TokenType::Normal; n],
        };
        let table = TokenTable::new(&parts.tokens).map_err(|e| match e {
            TableError::Duplicate { first, second } => LlmError::DuplicateToken {
                text: String::from_utf8_lossy(&parts.tokens[second as usize]).into_owned(),
                first,
                second,
            },
            TableError::TooMany => LlmError::InvalidValue {
                key: keys::TOKENIZER_TOKENS.to_string(),
                what: format!("{n} tokens is more than token ids can address"),
            },
        })?;
        let mut special = parts.special;
        for (key, id) in [
            (keys::TOKENIZER_BOS_ID, special.bos),
            (keys::TOKENIZER_EOS_ID, special.eos),
            (keys::TOKENIZER_UNK_ID, special.unk),
            (TOKENIZER_PAD_ID, special.pad),
            (TOKENIZER_SEP_ID, special.sep),
            (TOKENIZER_EOT_ID, special.eot),
            (TOKENIZER_EOM_ID, special.eom),
        ] {
            if let Some(id) = id
                && id as usize >= n
            {
                return Err(LlmError::InvalidValue {
                    key: key.to_string(),
                    what: format!("token id {id} is out of range (vocabulary of {n} tokens)"),
                });
            }
        }
        for (flag, flag_key, id, id_key) in [
            (
                parts.add_bos,
                keys::TOKENIZER_ADD_BOS,
                special.bos,
                keys::TOKENIZER_BOS_ID,
            ),
            (
                parts.add_eos,
                keys::TOKENIZER_ADD_EOS,
                special.eos,
                keys::TOKENIZER_EOS_ID,
            ),
        ] {
            if flag && id.is_none() {
                return Err(LlmError::InvalidValue {
                    key: flag_key.to_string(),
                    what: format!("true, but `{id_key}` is not set"),
                });
            }
        }
        let merges = match parts.model {
            TokenizerModel::Bpe => {
                Merges::parse(&parts.merges, &table).map_err(|e| LlmError::InvalidValue {
                    key: keys::TOKENIZER_MERGES.to_string(),
                    what: format!(
                        "merge {} ({:?}) is not two tokens separated by a space",
                        e.index,
                        String::from_utf8_lossy(&parts.merges[e.index])
                    ),
                })?
            }
            TokenizerModel::Spm | TokenizerModel::Wpm => Merges::default(),
        };
        if parts.model == TokenizerModel::Wpm {
            check_word_pieces(&parts.tokens, &types, special.unk)?;
        }

        // End of generation, by id and by text (llama.cpp's rules).
        let mut eog = Vec::new();
        let text_is = |id: usize, names: &[&str]| {
            names
                .iter()
                .any(|t| t.as_bytes() == parts.tokens[id].as_slice())
        };
        for id in 0..n {
            if special.eot.is_none() && text_is(id, EOT_TEXTS) {
                special.eot = Some(id as TokenId);
                types[id] = TokenType::Control;
            }
            if special.eom.is_none() && parts.tokens[id] == b"<|eom_id|>" {
                special.eom = Some(id as TokenId);
                types[id] = TokenType::Control;
            }
            if text_is(id, EOG_TEXTS) {
                eog.push(id as TokenId);
                types[id] = TokenType::Control;
            }
            if let Some(&(_, ends)) = FIM_TEXTS
                .iter()
                .find(|(t, _)| t.as_bytes() == parts.tokens[id].as_slice())
            {
                types[id] = TokenType::Control;
                if ends {
                    eog.push(id as TokenId);
                }
            }
        }
        eog.extend(
            [special.eos, special.eot, special.eom]
                .into_iter()
                .flatten(),
        );
        // gpt-oss: `<|end|>` ends a message, not the generation, when `<|return|>` and
        // `<|call|>` exist; its channel markers always render.
        let find = |t: &str| table.find(t.as_bytes());
        if let (Some(_), Some(_), Some(end)) =
            (find("<|return|>"), find("<|call|>"), find("<|end|>"))
        {
            eog.retain(|&id| id != end);
            types[end as usize] = TokenType::UserDefined;
        }
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = find(t) {
                types[id as usize] = TokenType::UserDefined;
            }
        }
        eog.sort_unstable();
        eog.dedup();

        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            *slot = match parts.model {
                TokenizerModel::Spm => table
                    .find(format!("<0x{b:02X}>").as_bytes())
                    .or_else(|| table.find(&[b as u8])),
                TokenizerModel::Bpe if !parts.pre.byte_encoded() => {
                    table.find(format!("<0x{b:02X}>").as_bytes())
                }
                TokenizerModel::Bpe => {
                    let mut s = [0u8; 4];
                    table.find(byte_level::BYTE_TO_CHAR[b].encode_utf8(&mut s).as_bytes())
                }
                TokenizerModel::Wpm => None,
            };
        }

        let mut vocab = Vocabulary {
            model: parts.model,
            pre: parts.pre,
            table,
            scores,
            types,
            attrs: vec![0; n],
            special,
            add_bos: parts.add_bos,
            add_eos: parts.add_eos,
            add_space_prefix: parts.add_space_prefix,
            ignore_merges: parts.ignore_merges,
            eog,
            byte_tokens,
            merges,
            special_cache: Vec::new(),
            spm_mark_joiners: Vec::new(),
            wpm_lowercase: parts.lowercase,
            wpm_strip_accents: parts.strip_accents,
            max_token_len: parts.tokens.iter().map(Vec::len).max().unwrap_or(0),
        };
        if vocab.model == TokenizerModel::Spm {
            vocab.spm_mark_joiners = mark_joiners(&vocab.table);
        }
        vocab.rebuild_special_cache();
        Ok(vocab)
    }

    fn rebuild_special_cache(&mut self) {
        let mut cache: Vec<TokenId> = (0..self.len() as TokenId)
            .filter(|&id| {
                matches!(
                    self.types[id as usize],
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                ) && !self.table.text(id).is_empty()
                    && std::str::from_utf8(self.table.text(id)).is_ok()
            })
            .collect();
        cache.sort_by_key(|&id| std::cmp::Reverse(self.table.text(id).len()));
        self.special_cache = cache;
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Always `false`: a vocabulary has at least one token.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// The algorithm.
    pub fn model(&self) -> TokenizerModel {
        self.model
    }

    /// The pre-tokenizer (meaningful for byte-level BPE).
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// The special ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// The BOS id.
    pub fn bos(&self) -> Option<TokenId> {
        self.special.bos
    }

    /// The EOS id.
    pub fn eos(&self) -> Option<TokenId> {
        self.special.eos
    }

    /// Whether tokenizing with special tokens adds BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether tokenizing with special tokens adds EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether SentencePiece text gets a leading `▁`.
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// Whether whole-word tokens skip the BPE merges.
    pub fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }

    /// WordPiece: whether text is lowercased before matching.
    pub fn lowercase(&self) -> bool {
        self.wpm_lowercase
    }

    /// WordPiece: whether text is NFD-decomposed and its accents dropped.
    pub fn strip_accents(&self) -> bool {
        self.wpm_strip_accents
    }

    /// The number of usable BPE merges.
    pub fn merge_count(&self) -> usize {
        self.merges.len()
    }

    /// Whether `id` ends generation: EOS, EOT, EOM, and tokens such as `<|eot_id|>`,
    /// `<|im_end|>` or `<end_of_turn>`.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// Every end-of-generation id, ascending.
    pub fn eog_ids(&self) -> &[TokenId] {
        &self.eog
    }

    /// Token `id`'s text as stored (`▁the`, `Ġthe`, `<0x0A>`), or `None` when out of
    /// range.
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        ((id as usize) < self.len()).then(|| self.table.text(id))
    }

    /// Token `id`'s text as UTF-8, when it is in range and valid.
    pub fn token_str(&self, id: TokenId) -> Option<&str> {
        self.token_bytes(id)
            .and_then(|b| std::str::from_utf8(b).ok())
    }

    /// Token `id`'s score (0 when the vocabulary has none).
    pub fn score(&self, id: TokenId) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// Token `id`'s type.
    pub fn token_type(&self, id: TokenId) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The id of the token whose stored text is `text`.
    pub fn token_id(&self, text: &[u8]) -> Option<TokenId> {
        self.table.find(text)
    }

    /// The texts of the control and unknown tokens that special-token parsing matches
    /// (`<s>`, `<|im_end|>`, ...), longest first.
    #[cfg(feature = "chat")]
    pub(crate) fn control_texts(&self) -> impl Iterator<Item = &str> {
        self.special_cache.iter().filter_map(|&id| {
            matches!(
                self.types[id as usize],
                TokenType::Control | TokenType::Unknown
            )
            .then(|| std::str::from_utf8(self.table.text(id)).ok())
            .flatten()
        })
    }

    /// Whether text matching control/user-defined token `id` takes the ASCII
    /// whitespace to its left (`lstrip`) or right (`rstrip`) with it.
    pub fn token_strip(&self, id: TokenId) -> (bool, bool) {
        let a = self.attrs.get(id as usize).copied().unwrap_or(0);
        (a & ATTR_LSTRIP != 0, a & ATTR_RSTRIP != 0)
    }

    /// Sets the whitespace stripping of token `id` (see [`Vocabulary::token_strip`]);
    /// out-of-range ids are ignored.
    pub fn set_token_strip(&mut self, id: TokenId, lstrip: bool, rstrip: bool) {
        if let Some(a) = self.attrs.get_mut(id as usize) {
            *a = (if lstrip { ATTR_LSTRIP } else { 0 }) | (if rstrip { ATTR_RSTRIP } else { 0 });
        }
    }

    /// Whether some token has the character `c` (its UTF-8 bytes) right before a `▁`.
    pub(crate) fn spm_joins_mark(&self, c: &[u8]) -> bool {
        self.spm_mark_joiners
            .binary_search_by(|j| (**j).cmp(c))
            .is_ok()
    }

    /// Checks that `id` is in range.
    pub(crate) fn check_id(&self, id: TokenId) -> Result<()> {
        if (id as usize) < self.len() {
            Ok(())
        } else {
            Err(LlmError::TokenId {
                id: id as u64,
                n_vocab: self.len(),
            })
        }
    }
}

/// `tokenizer.ggml.padding_token_id`.
pub(crate) const TOKENIZER_PAD_ID: &str = "tokenizer.ggml.padding_token_id";
/// `tokenizer.ggml.seperator_token_id` (sic: llama.cpp's spelling).
pub(crate) const TOKENIZER_SEP_ID: &str = "tokenizer.ggml.seperator_token_id";
/// `tokenizer.ggml.eot_token_id`.
pub(crate) const TOKENIZER_EOT_ID: &str = "tokenizer.ggml.eot_token_id";
/// `tokenizer.ggml.eom_token_id`.
pub(crate) const TOKENIZER_EOM_ID: &str = "tokenizer.ggml.eom_token_id";
/// `tokenizer.ggml.add_space_prefix`.
pub(crate) const TOKENIZER_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";

/// WordPiece's checks: an unknown token (what a word without pieces becomes), and
/// normal and user-defined pieces that are UTF-8 text (what normalized words are
/// matched against) and not empty.
fn check_word_pieces(tokens: &[Vec<u8>], types: &[TokenType], unk: Option<TokenId>) -> Result<()> {
    if unk.is_none() {
        return Err(LlmError::InvalidValue {
            key: keys::TOKENIZER_UNK_ID.to_string(),
            what: "a WordPiece (`bert`) vocabulary needs an unknown token ([UNK]), and none is set"
                .to_string(),
        });
    }
    for (id, (text, ty)) in tokens.iter().zip(types).enumerate() {
        if !matches!(ty, TokenType::Normal | TokenType::UserDefined) {
            continue;
        }
        let what = if text.is_empty() {
            "is empty"
        } else if std::str::from_utf8(text).is_err() {
            "is not UTF-8 text"
        } else {
            continue;
        };
        return Err(LlmError::InvalidValue {
            key: keys::TOKENIZER_TOKENS.to_string(),
            what: format!(
                "WordPiece token {id} ({:?}) {what}",
                String::from_utf8_lossy(text)
            ),
        });
    }
    Ok(())
}

/// The characters that some token has immediately before a `▁`, sorted.
fn mark_joiners(table: &TokenTable) -> Vec<Box<[u8]>> {
    const MARK: &[u8] = "\u{2581}".as_bytes();
    let mut joiners: Vec<Box<[u8]>> = Vec::new();
    for id in 0..table.len() as TokenId {
        let text = table.text(id);
        let mut prev = None;
        let mut pos = 0;
        while pos < text.len() {
            let len = super::spm::utf8_len(text[pos]).min(text.len() - pos);
            if text[pos..].starts_with(MARK)
                && let Some(p) = prev
            {
                joiners.push(text[p..pos].into());
            }
            prev = Some(pos);
            pos += len;
        }
    }
    joiners.sort();
    joiners.dedup();
    joiners
}
