//! Reading a [`Vocabulary`] from GGUF metadata (`tokenizer.ggml.*`) and writing one back,
//! with llama.cpp's defaults and checks.

use crate::error::{LlmError, Result};
use crate::gguf::{Array, Metadata, TokenType, keys};
use crate::llama2c::Llama2cVocab;

use super::pre_tokenizer::{PRE_TOKENIZER_NAMES, PreTokenizer, lookup_name};
use super::vocabulary::{
    TOKENIZER_ADD_SPACE_PREFIX, TOKENIZER_EOM_ID, TOKENIZER_EOT_ID, TOKENIZER_PAD_ID,
    TOKENIZER_SEP_ID, TokenId, TokenizerModel, VocabParts, Vocabulary,
};

impl Vocabulary {
    /// Reads the vocabulary a model file's metadata describes.
    ///
    /// Keys: `tokenizer.ggml.model` (`llama`, `gpt2`, `gemma4` or `bert`), `.pre`
    /// (byte-level BPE; absent means `default`), `.tokens`, `.scores` (f32 or i32),
    /// `.token_type`, `.merges` (required for `gpt2` and `gemma4`), the special ids
    /// (`.bos_token_id`, `.eos_token_id`, `.unknown_token_id`, `.padding_token_id`,
    /// `.seperator_token_id`, `.eot_token_id`, `.eom_token_id`) and flags
    /// (`.add_bos_token`, `.add_eos_token`, `.add_space_prefix`).
    ///
    /// WordPiece (`bert`): BOS is `.bos_token_id`, else `.cls_token_id`, else 101
    /// (`[CLS]`); EOS is `.eos_token_id`, else the separator (`[SEP]`, 102); both are
    /// added unless the flags say otherwise, so that text is framed `[CLS] … [SEP]` as
    /// llama.cpp frames it. `.normalizer.lowercase` (default true) and
    /// `.normalizer.strip_accents` (default: as lowercase) set the normalizer. A
    /// WordPiece vocabulary without an unknown token is an error.
    ///
    /// Errors: a missing or mistyped key, an unknown model or pre-tokenizer, per-token
    /// arrays whose length is not the number of tokens, an unknown token type,
    /// duplicate token texts, malformed merges. A special id outside the vocabulary is
    /// ignored, as llama.cpp does (some files carry a padding id one past the end).
    ///
    /// Phi-3 models (`general.name` containing `phi-3` or `phi3`) get llama.cpp's
    /// right-stripping of whitespace after their special tokens.
    pub fn from_gguf(md: &Metadata) -> Result<Vocabulary> {
        let model_name = md.get_str(keys::TOKENIZER_MODEL)?;
        // `gemma4` is byte-level BPE's machinery with its own pre-tokenizer, as in
        // llama.cpp (which accepts `gpt2` with pre `gemma4` as the same thing).
        let gemma4 = model_name == "gemma4";
        let model = match gemma4 {
            true => Some(TokenizerModel::Bpe),
            false => TokenizerModel::from_gguf_name(model_name),
        }
        .ok_or_else(|| LlmError::UnknownTokenizer {
            key: keys::TOKENIZER_MODEL,
            name: model_name.to_string(),
            supported: "llama, gpt2, gemma4, bert".to_string(),
        })?;
        let tokens = md.get_string_array(keys::TOKENIZER_TOKENS)?.to_vec();
        let n = tokens.len();
        let mut parts = VocabParts::new(model, tokens);

        if model == TokenizerModel::Bpe {
            let pre_name = match gemma4 {
                true => "gemma4",
                false => md.opt_str(keys::TOKENIZER_PRE)?.unwrap_or("default"),
            };
            let entry = lookup_name(pre_name).ok_or_else(|| LlmError::UnknownTokenizer {
                key: keys::TOKENIZER_PRE,
                name: pre_name.to_string(),
                supported: PRE_TOKENIZER_NAMES
                    .iter()
                    .map(|n| n.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
            parts.pre = entry.pre;
            parts.ignore_merges = entry.ignore_merges;
            parts.add_bos = entry.add_bos;
            parts.merges = md.get_string_array(keys::TOKENIZER_MERGES)?.to_vec();
        }

        parts.scores = match md.opt_array(keys::TOKENIZER_SCORES)? {
            None => None,
            Some(Array::F32(v)) => Some(v.clone()),
            Some(Array::I32(v)) => Some(v.iter().map(|&s| s as f32).collect()),
            Some(other) => {
                return Err(LlmError::KeyType {
                    key: keys::TOKENIZER_SCORES.to_string(),
                    expected: "an array of f32",
                    found: format!("an array of {}", other.element_type()),
                });
            }
        };
        if md.contains(keys::TOKENIZER_TOKEN_TYPE) {
            let raw = md.get_i32_array(keys::TOKENIZER_TOKEN_TYPE)?;
            let types = raw
                .iter()
                .enumerate()
                .map(|(id, &t)| {
                    TokenType::from_i32(t).ok_or_else(|| LlmError::InvalidValue {
                        key: keys::TOKENIZER_TOKEN_TYPE.to_string(),
                        what: format!("token {id} has type {t}, which is not a token type (0..=6)"),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            parts.token_types = Some(types);
        }

        let special = &mut parts.special;
        for (key, slot) in [
            (keys::TOKENIZER_BOS_ID, &mut special.bos),
            (keys::TOKENIZER_EOS_ID, &mut special.eos),
            (keys::TOKENIZER_UNK_ID, &mut special.unk),
            (TOKENIZER_PAD_ID, &mut special.pad),
            (TOKENIZER_SEP_ID, &mut special.sep),
            (TOKENIZER_EOT_ID, &mut special.eot),
            (TOKENIZER_EOM_ID, &mut special.eom),
        ] {
            if let Some(id) = opt_token_id(md, key)? {
                // Out-of-range ids keep the default, as in llama.cpp.
                if (id as usize) < n {
                    *slot = Some(id as TokenId);
                }
            }
        }
        if model == TokenizerModel::Wpm {
            read_word_piece_keys(md, &mut parts)?;
        }
        if let Some(v) = md.opt_bool(keys::TOKENIZER_ADD_BOS)? {
            // llama.cpp forces BOS on for Gemma 4 (when it has one).
            parts.add_bos = v || (parts.pre == PreTokenizer::Gemma4 && parts.special.bos.is_some());
        }
        if let Some(v) = md.opt_bool(keys::TOKENIZER_ADD_EOS)? {
            parts.add_eos = v;
        }
        if let Some(v) = md.opt_bool(TOKENIZER_ADD_SPACE_PREFIX)? {
            parts.add_space_prefix = v;
        }

        let mut vocab = Vocabulary::from_parts(parts)?;
        let name = md
            .opt_str(keys::GENERAL_NAME)
            .ok()
            .flatten()
            .unwrap_or("")
            .to_ascii_lowercase();
        if name.contains("phi-3") || name.contains("phi3") {
            vocab.apply_phi3_strip();
        }
        Ok(vocab)
    }

    /// llama.cpp's Phi-3 rule: text right of a special token loses its leading ASCII
    /// whitespace, except after `<unk>`, `<s>` and `<|endoftext|>`; `</s>` strips too.
    fn apply_phi3_strip(&mut self) {
        let ids: Vec<TokenId> = self.special_cache.clone();
        for id in ids {
            self.set_token_strip(id, false, true);
        }
        if let Some(id) = self.token_id(b"</s>") {
            self.set_token_strip(id, false, true);
        }
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            if let Some(id) = self.token_id(t.as_bytes()) {
                self.set_token_strip(id, false, false);
            }
        }
    }

    /// Reads a llama2.c tokenizer (as converted by [`Llama2cVocab`]): SentencePiece
    /// style, `<unk>` 0, BOS 1, EOS 2, adding BOS and a space prefix.
    pub fn from_llama2c(vocab: &Llama2cVocab) -> Result<Vocabulary> {
        let mut md = Metadata::new();
        vocab.write_metadata(&mut md);
        Vocabulary::from_gguf(&md)
    }

    /// Writes this vocabulary's `tokenizer.ggml.*` keys to `md`: what
    /// [`Vocabulary::from_gguf`] reads back to a vocabulary that tokenizes the same.
    /// Merges are written in rank order, without the ones that can never apply.
    pub fn write_gguf_metadata(&self, md: &mut Metadata) {
        md.set(keys::TOKENIZER_MODEL, self.model.gguf_name());
        if self.model == TokenizerModel::Bpe {
            md.set(keys::TOKENIZER_PRE, self.pre.gguf_name());
        }
        let tokens = (0..self.len() as TokenId)
            .map(|id| self.table.text(id).to_vec())
            .collect();
        md.set(keys::TOKENIZER_TOKENS, Array::String(tokens));
        md.set(keys::TOKENIZER_SCORES, Array::F32(self.scores.clone()));
        md.set(
            keys::TOKENIZER_TOKEN_TYPE,
            Array::I32(self.types.iter().map(|t| t.as_i32()).collect()),
        );
        if self.model == TokenizerModel::Bpe {
            let merges = self
                .merges
                .ranked()
                .into_iter()
                .map(|(l, r)| {
                    let mut line = self.table.text(l).to_vec();
                    line.push(b' ');
                    line.extend_from_slice(self.table.text(r));
                    line
                })
                .collect();
            md.set(keys::TOKENIZER_MERGES, Array::String(merges));
        }
        let s = self.special;
        for (key, id) in [
            (keys::TOKENIZER_BOS_ID, s.bos),
            (keys::TOKENIZER_EOS_ID, s.eos),
            (keys::TOKENIZER_UNK_ID, s.unk),
            (TOKENIZER_PAD_ID, s.pad),
            (TOKENIZER_SEP_ID, s.sep),
            (TOKENIZER_EOT_ID, s.eot),
            (TOKENIZER_EOM_ID, s.eom),
        ] {
            if let Some(id) = id {
                md.set(key, id);
            }
        }
        md.set(keys::TOKENIZER_ADD_BOS, self.add_bos);
        md.set(keys::TOKENIZER_ADD_EOS, self.add_eos);
        md.set(TOKENIZER_ADD_SPACE_PREFIX, self.add_space_prefix);
        if self.model == TokenizerModel::Wpm {
            md.set(TOKENIZER_NORMALIZER_LOWERCASE, self.wpm_lowercase);
            md.set(TOKENIZER_NORMALIZER_STRIP_ACCENTS, self.wpm_strip_accents);
        }
    }
}

/// `tokenizer.ggml.cls_token_id`: BERT's `[CLS]`, WordPiece's BOS when
/// `bos_token_id` is absent.
const TOKENIZER_CLS_ID: &str = "tokenizer.ggml.cls_token_id";
/// `tokenizer.ggml.normalizer.lowercase`.
const TOKENIZER_NORMALIZER_LOWERCASE: &str = "tokenizer.ggml.normalizer.lowercase";
/// `tokenizer.ggml.normalizer.strip_accents`.
const TOKENIZER_NORMALIZER_STRIP_ACCENTS: &str = "tokenizer.ggml.normalizer.strip_accents";

/// WordPiece's defaults that depend on other keys: BOS from `[CLS]`, EOS from
/// `[SEP]`, BOS/EOS added when present; the normalizer flags.
fn read_word_piece_keys(md: &Metadata, parts: &mut VocabParts) -> Result<()> {
    let n = parts.tokens.len();
    let in_range = |id: Option<u64>| id.filter(|&id| (id as usize) < n).map(|id| id as TokenId);
    if !md.contains(keys::TOKENIZER_BOS_ID)
        && let Some(cls) = in_range(opt_token_id(md, TOKENIZER_CLS_ID)?)
    {
        parts.special.bos = Some(cls);
    }
    if !md.contains(keys::TOKENIZER_EOS_ID) && parts.special.sep.is_some() {
        parts.special.eos = parts.special.sep;
    }
    parts.add_bos = parts.special.bos.is_some();
    parts.add_eos = parts.special.eos.is_some();
    parts.lowercase = md.opt_bool(TOKENIZER_NORMALIZER_LOWERCASE)?.unwrap_or(true);
    parts.strip_accents = md
        .opt_bool(TOKENIZER_NORMALIZER_STRIP_ACCENTS)?
        .unwrap_or(parts.lowercase);
    Ok(())
}

/// A token id key's value: any integer type; negative values (some writers store -1
/// for "none") read as absent.
fn opt_token_id(md: &Metadata, key: &str) -> Result<Option<u64>> {
    match md.get(key) {
        None => Ok(None),
        Some(v) => match v.as_integer() {
            Some(i) => Ok(u64::try_from(i).ok()),
            None => Err(LlmError::KeyType {
                key: key.to_string(),
                expected: "an integer",
                found: v.describe(),
            }),
        },
    }
}
