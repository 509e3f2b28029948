//! Log-probabilities as OpenAI writes them: chat's `logprobs.content` (a list of
//! `{token, logprob, bytes, top_logprobs}`) and completions' four parallel lists
//! (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`), the prompt's first token
//! with `null`s when the prompt is echoed.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::engine::{Model, TokenLogprob};
use crate::server::openai::Endpoint;
use crate::tokenizer::Vocabulary;

/// Token `id` as the lists show it: its text (control tokens by name; bytes that are not
/// UTF-8 on their own replaced) and its bytes.
fn token_text(vocab: &Vocabulary, id: u32) -> (String, Vec<u8>) {
    let bytes = vocab.token_piece(id, true).unwrap_or_default();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

/// Token `id` as completions' lists show it: its text, or `bytes:\xNN...` when its bytes
/// are not UTF-8 on their own (as OpenAI writes such tokens; distinct tokens keep
/// distinct keys in `top_logprobs`).
fn completion_token_text(vocab: &Vocabulary, id: u32) -> String {
    let bytes = vocab.token_piece(id, true).unwrap_or_default();
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => e
            .as_bytes()
            .iter()
            .fold(String::from("bytes:"), |mut out, b| {
                out.push_str(&format!("\\x{b:02x}"));
                out
            }),
    }
}

/// How many characters token `id` adds to the output text (control tokens none).
fn text_chars(vocab: &Vocabulary, id: u32) -> usize {
    let bytes = vocab.token_piece(id, false).unwrap_or_default();
    String::from_utf8_lossy(&bytes).chars().count()
}

/// Chat's `{"token", "logprob", "bytes"}` of token `id`.
fn chat_token(vocab: &Vocabulary, id: u32, logprob: f32) -> Map<String, Value> {
    let (token, bytes) = token_text(vocab, id);
    let mut m = Map::new();
    m.insert("token".into(), token.into());
    m.insert("logprob".into(), logprob.into());
    m.insert("bytes".into(), bytes.into());
    m
}

/// Chat's `logprobs` object for `entries`: `{"content": [...]}`.
pub(crate) fn chat_logprobs(vocab: &Vocabulary, entries: &[TokenLogprob]) -> Value {
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut m = chat_token(vocab, e.id, e.logprob);
            let top: Vec<Value> = e
                .top
                .iter()
                .map(|&(id, lp)| Value::Object(chat_token(vocab, id, lp)))
                .collect();
            m.insert("top_logprobs".into(), top.into());
            Value::Object(m)
        })
        .collect();
    json!({ "content": content })
}

/// Completions' `logprobs` lists, built a piece at a time: the text offsets run on
/// across pieces (a stream's chunks), counted in characters of the response text.
#[derive(Debug, Default)]
pub(crate) struct CompletionLogprobs {
    tokens: Vec<Value>,
    token_logprobs: Vec<Value>,
    top_logprobs: Vec<Value>,
    text_offset: Vec<Value>,
    offset: usize,
}

impl CompletionLogprobs {
    /// Adds an echoed prompt: its first token with `null`s (nothing predicts it), then
    /// `entries` (one per later prompt token).
    pub(crate) fn push_prompt(
        &mut self,
        vocab: &Vocabulary,
        prompt: &[u32],
        entries: &[TokenLogprob],
    ) {
        let Some(&first) = prompt.first() else {
            return;
        };
        self.add(vocab, first, Value::Null, Value::Null);
        self.push(vocab, entries);
    }

    /// Places the next token at character `offset` (the generated text's start after
    /// an echoed prompt, whose own offsets follow its token pieces).
    pub(crate) fn continue_at(&mut self, offset: usize) {
        self.offset = offset;
    }

    /// Adds generated tokens.
    pub(crate) fn push(&mut self, vocab: &Vocabulary, entries: &[TokenLogprob]) {
        for e in entries {
            let mut top = Map::new();
            for &(id, lp) in &e.top {
                // Tokens with the same text (a byte-level and a merged spelling)
                // share a key, as in OpenAI's dictionaries; the likelier (listed
                // first) stays.
                top.entry(completion_token_text(vocab, id))
                    .or_insert(lp.into());
            }
            self.add(vocab, e.id, e.logprob.into(), Value::Object(top));
        }
    }

    fn add(&mut self, vocab: &Vocabulary, id: u32, logprob: Value, top: Value) {
        self.tokens.push(completion_token_text(vocab, id).into());
        self.token_logprobs.push(logprob);
        self.top_logprobs.push(top);
        self.text_offset.push(self.offset.into());
        self.offset += text_chars(vocab, id);
    }

    /// The lists added since the last call, as a `logprobs` object.
    pub(crate) fn take(&mut self) -> Value {
        json!({
            "tokens": std::mem::take(&mut self.tokens),
            "token_logprobs": std::mem::take(&mut self.token_logprobs),
            "top_logprobs": std::mem::take(&mut self.top_logprobs),
            "text_offset": std::mem::take(&mut self.text_offset),
        })
    }
}

/// A response's log-probabilities in its endpoint's form: entries are added as the
/// engine sends them and taken for each chunk (or once, for a whole response).
#[derive(Debug)]
pub(crate) struct LogprobWriter {
    model: Arc<Model>,
    endpoint: Endpoint,
    chat: Vec<TokenLogprob>,
    completion: CompletionLogprobs,
}

impl LogprobWriter {
    /// A writer for `endpoint`, reading token texts from `model`'s vocabulary.
    pub(crate) fn new(model: Arc<Model>, endpoint: Endpoint) -> LogprobWriter {
        LogprobWriter {
            model,
            endpoint,
            chat: Vec::new(),
            completion: CompletionLogprobs::default(),
        }
    }

    /// Adds an echoed prompt (completions) whose text is `echo_chars` characters long:
    /// the generated tokens' offsets start there.
    pub(crate) fn push_prompt(
        &mut self,
        prompt: &[u32],
        entries: &[TokenLogprob],
        echo_chars: usize,
    ) {
        self.completion
            .push_prompt(self.model.vocab(), prompt, entries);
        self.completion.continue_at(echo_chars);
    }

    /// Adds generated tokens.
    pub(crate) fn push(&mut self, entries: Vec<TokenLogprob>) {
        match self.endpoint {
            Endpoint::Chat => self.chat.extend(entries),
            Endpoint::Completions => self.completion.push(self.model.vocab(), &entries),
        }
    }

    /// Whether entries were added since the last [`LogprobWriter::take`].
    pub(crate) fn has_pending(&self) -> bool {
        match self.endpoint {
            Endpoint::Chat => !self.chat.is_empty(),
            Endpoint::Completions => !self.completion.tokens.is_empty(),
        }
    }

    /// The `logprobs` object of what was added since the last call.
    pub(crate) fn take(&mut self) -> Value {
        match self.endpoint {
            Endpoint::Chat => chat_logprobs(self.model.vocab(), &std::mem::take(&mut self.chat)),
            Endpoint::Completions => self.completion.take(),
        }
    }
}

/// The `logprobs` of a chunk or response: what `writer` holds, `null` without one.
pub(crate) fn take_logprobs(writer: &mut Option<LogprobWriter>) -> Value {
    writer.as_mut().map_or(Value::Null, LogprobWriter::take)
}
