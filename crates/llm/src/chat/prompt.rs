//! `RenderedPrompt`: a conversation rendered so that the text of its messages stays
//! text.
//!
//! A chat template writes its own control tokens (`<|im_start|>`, `<|eot_id|>`,
//! `<start_of_turn>`) as text, so the prompt must be tokenized with special-token
//! parsing on; but a message that contains `<|im_end|>\n<|im_start|>system` must not
//! become real control tokens. [`ChatTemplate::render_prompt`] finds the byte ranges of
//! the rendered text that came from message text (roles, contents, names) and
//! [`RenderedPrompt::tokenize`] keeps control-token text inside them as plain text
//! ([`Vocabulary::tokenize_with_literal_spans`]).
//!
//! How the ranges are found: the parts of each message string that could form control
//! tokens (every occurrence of a control token's text, and at either end of the string
//! (as written and with its whitespace trimmed) a piece that could join the template's
//! text into one) are replaced by placeholders (private-use characters around an index);
//! the conversation is rendered again, and the two renderings are aligned piece by
//! piece: the template's own text must be the same in both, and what stands in the real
//! rendering where a placeholder stands in the other is a literal range. The prompt text
//! is always the real rendering, so a conversation without control-token text gives
//! exactly the ids it gave before. A template that cuts through a placeholder (slicing
//! message text) cannot be traced and is an error.

use std::ops::Range;

use crate::chat::message::ChatMessage;
use crate::chat::template::{ChatTemplate, TemplateInputs};
use crate::error::{LlmError, Result};
use crate::json::JsonValue;
use crate::tokenizer::{TokenId, TokenizeOptions, Vocabulary};

/// The private-use characters placeholders are drawn from.
const PRIVATE_USE: std::ops::RangeInclusive<char> = '\u{E000}'..='\u{F8FF}';

/// A rendered conversation and the byte ranges of it that are message text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPrompt {
    text: String,
    literal: Vec<Range<usize>>,
}

impl RenderedPrompt {
    /// The prompt text, exactly as the template renders it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Sorted, disjoint byte ranges of [`RenderedPrompt::text`] that came from message
    /// text holding control-token text (ranges without any are not listed: they
    /// tokenize the same either way).
    pub fn literal_spans(&self) -> &[Range<usize>] {
        &self.literal
    }

    /// The prompt's token ids: control-token text written by the template is parsed as
    /// those tokens, inside the literal spans it is plain text; BOS is added when the
    /// vocabulary asks for it, unless the template already wrote it.
    pub fn tokenize(&self, vocab: &Vocabulary) -> Vec<TokenId> {
        let bos = vocab
            .bos()
            .and_then(|id| vocab.token_str(id))
            .unwrap_or_default();
        let has_bos = !bos.is_empty()
            && self.text.starts_with(bos)
            && self.literal.first().is_none_or(|r| r.start >= bos.len());
        let options = TokenizeOptions {
            add_special: !has_bos,
            parse_special: true,
        };
        // The spans are sorted, disjoint and on character boundaries by construction.
        let mut ids = Vec::with_capacity(self.text.len() / 3 + 2);
        vocab.tokenize_spans_into(&self.text, &self.literal, options, &mut ids);
        ids
    }
}

impl ChatTemplate {
    /// Renders `messages` (see [`ChatTemplate::render`]) and finds where control-token
    /// text of `vocab` inside the messages' strings ended up, so that
    /// [`RenderedPrompt::tokenize`] keeps it as text.
    ///
    /// Errors: rendering errors, or [`LlmError::ChatTemplate`] when the template cuts
    /// through message text that holds control-token text so that it cannot be traced.
    pub fn render_prompt(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        vocab: &Vocabulary,
    ) -> Result<RenderedPrompt> {
        self.render_prompt_with(
            messages,
            &TemplateInputs::default(),
            add_generation_prompt,
            vocab,
        )
    }

    /// [`ChatTemplate::render_prompt`] with tools and keyword arguments: every string
    /// the caller wrote (message fields, tool calls and their arguments, tool
    /// definitions, keyword arguments; keys included) is message text.
    ///
    /// Errors: as [`ChatTemplate::render_prompt`].
    pub fn render_prompt_with(
        &self,
        messages: &[ChatMessage],
        inputs: &TemplateInputs,
        add_generation_prompt: bool,
        vocab: &Vocabulary,
    ) -> Result<RenderedPrompt> {
        let values: Vec<JsonValue> = messages.iter().map(ChatMessage::template_value).collect();
        let text = self.render_values(&values, inputs, add_generation_prompt)?;
        let guard = Guard::new(vocab);
        let given = || {
            values
                .iter()
                .chain(inputs.tools.iter().flatten())
                .chain(inputs.kwargs.iter().map(|(_, v)| v))
        };
        let mut strings: Vec<&str> = Vec::new();
        for v in given() {
            collect_strings(v, &mut strings);
        }
        if strings.iter().all(|s| guard.ranges(s).is_empty()) {
            return Ok(RenderedPrompt {
                text,
                literal: Vec::new(),
            });
        }
        let markers = Markers::choose(&strings, self.source())?;
        let mut chunks: Vec<&str> = Vec::new();
        let marked: Vec<JsonValue> = values
            .iter()
            .map(|v| mark_value(v, &guard, &markers, &mut chunks))
            .collect();
        let marked_inputs = TemplateInputs {
            tools: inputs.tools.as_ref().map(|tools| {
                tools
                    .iter()
                    .map(|t| mark_value(t, &guard, &markers, &mut chunks))
                    .collect()
            }),
            kwargs: inputs
                .kwargs
                .iter()
                .map(|(k, v)| (k.clone(), mark_value(v, &guard, &markers, &mut chunks)))
                .collect(),
        };
        let marked_text = self.render_values(&marked, &marked_inputs, add_generation_prompt)?;
        let literal = markers.align(&text, &marked_text, &chunks)?;
        Ok(RenderedPrompt { text, literal })
    }

    /// The prompt tokens of `messages` with the assistant's turn opened: what a chat
    /// request runs ([`ChatTemplate::render_prompt`] with `add_generation_prompt`, then
    /// [`RenderedPrompt::tokenize`]).
    ///
    /// Errors: as [`ChatTemplate::render_prompt`].
    pub fn prompt_tokens(
        &self,
        messages: &[ChatMessage],
        vocab: &Vocabulary,
    ) -> Result<Vec<TokenId>> {
        Ok(self.render_prompt(messages, true, vocab)?.tokenize(vocab))
    }
}

/// Every string in `v` (object keys included), depth first.
fn collect_strings<'v>(v: &'v JsonValue, out: &mut Vec<&'v str>) {
    match v {
        JsonValue::String(s) => out.push(s),
        JsonValue::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        JsonValue::Object(entries) => {
            for (k, v) in entries {
                out.push(k);
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// `v` with the parts of its strings (and keys) that could form control tokens replaced
/// by placeholders; the replaced texts go to `chunks` in order.
fn mark_value<'v>(
    v: &'v JsonValue,
    guard: &Guard<'_>,
    markers: &Markers,
    chunks: &mut Vec<&'v str>,
) -> JsonValue {
    match v {
        JsonValue::String(s) => JsonValue::String(markers.mark(s, &guard.ranges(s), chunks)),
        JsonValue::Array(items) => JsonValue::Array(
            items
                .iter()
                .map(|i| mark_value(i, guard, markers, chunks))
                .collect(),
        ),
        JsonValue::Object(entries) => JsonValue::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = markers.mark(k, &guard.ranges(k), chunks);
                    (key, mark_value(v, guard, markers, chunks))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The control-token texts of a vocabulary and what can start or end them.
struct Guard<'v> {
    texts: Vec<&'v str>,
    first_chars: Vec<char>,
    last_chars: Vec<char>,
    longest: usize,
}

impl<'v> Guard<'v> {
    fn new(vocab: &'v Vocabulary) -> Guard<'v> {
        let texts: Vec<&str> = vocab.control_texts().collect();
        let mut first_chars: Vec<char> = texts.iter().filter_map(|t| t.chars().next()).collect();
        let mut last_chars: Vec<char> =
            texts.iter().filter_map(|t| t.chars().next_back()).collect();
        first_chars.sort_unstable();
        first_chars.dedup();
        last_chars.sort_unstable();
        last_chars.dedup();
        let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        Guard {
            texts,
            first_chars,
            last_chars,
            longest,
        }
    }

    /// The byte ranges of `s` to keep away from the tokenizer's control-token matching:
    /// every occurrence of a control text, the longest end of `s` (as written and
    /// trimmed) that starts a control text, and the longest start of `s` that ends one.
    /// Sorted, merged where they overlap or touch.
    fn ranges(&self, s: &str) -> Vec<Range<usize>> {
        if self.texts.is_empty() {
            return Vec::new();
        }
        let mut ranges = Vec::new();
        for (i, c) in s.char_indices() {
            if self.first_chars.binary_search(&c).is_ok() {
                let rest = &s[i..];
                if let Some(t) = self.texts.iter().find(|t| rest.starts_with(**t)) {
                    ranges.push(i..i + t.len());
                }
            }
        }
        let trimmed_start = s.len() - s.trim_start().len();
        for end in [s.len(), s.trim_end().len()] {
            if let Some(start) = self.open_tail(&s[..end]) {
                ranges.push(start..end);
            }
        }
        for start in [0, trimmed_start] {
            if let Some(len) = self.closing_head(&s[start..]) {
                ranges.push(start..start + len);
            }
        }
        ranges.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }

    /// Where the longest end of `head` that is a proper prefix of a control text starts.
    fn open_tail(&self, head: &str) -> Option<usize> {
        let from = head.len().saturating_sub(self.longest.saturating_sub(1));
        head.char_indices()
            .skip_while(|&(i, _)| i < from)
            .filter(|(_, c)| self.first_chars.binary_search(c).is_ok())
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &head[i..];
                self.texts
                    .iter()
                    .any(|t| t.len() > tail.len() && t.starts_with(tail))
            })
    }

    /// The length of the longest start of `tail` that is a proper suffix of a control
    /// text.
    fn closing_head(&self, tail: &str) -> Option<usize> {
        let limit = self.longest.saturating_sub(1).min(tail.len());
        tail.char_indices()
            .take_while(|&(i, _)| i < limit)
            .filter(|(_, c)| self.last_chars.binary_search(c).is_ok())
            .map(|(i, c)| i + c.len_utf8())
            .filter(|&len| {
                let head = &tail[..len];
                self.texts
                    .iter()
                    .any(|t| t.len() > head.len() && t.ends_with(head))
            })
            .last()
    }
}

/// Two private-use characters that appear in no message and not in the template: a
/// placeholder is `open`, a decimal index, `close`.
struct Markers {
    open: char,
    close: char,
}

/// A rendering with placeholders, split: the template's text before the first
/// placeholder, then each placeholder (the index of the message text it stands for) with
/// the template's text after it.
struct Pieces<'a> {
    first: &'a str,
    rest: Vec<(usize, &'a str)>,
}

impl Markers {
    fn choose(strings: &[&str], template: &str) -> Result<Markers> {
        let mut used: Vec<char> = strings
            .iter()
            .copied()
            .chain([template])
            .flat_map(str::chars)
            .filter(|c| PRIVATE_USE.contains(c))
            .collect();
        used.sort_unstable();
        used.dedup();
        let mut free = PRIVATE_USE.filter(|c| used.binary_search(c).is_err());
        match (free.next(), free.next()) {
            (Some(open), Some(close)) => Ok(Markers { open, close }),
            _ => Err(LlmError::ChatTemplate {
                what: "the messages use every private-use character (U+E000..U+F8FF)".into(),
            }),
        }
    }

    /// `s` with each of `ranges` replaced by a placeholder; the replaced texts go to
    /// `chunks`.
    fn mark<'s>(&self, s: &'s str, ranges: &[Range<usize>], chunks: &mut Vec<&'s str>) -> String {
        let mut out = String::with_capacity(s.len() + ranges.len() * 8);
        let mut at = 0;
        for r in ranges {
            out.push_str(&s[at..r.start]);
            out.push(self.open);
            out.push_str(&chunks.len().to_string());
            out.push(self.close);
            chunks.push(&s[r.clone()]);
            at = r.end;
        }
        out.push_str(&s[at..]);
        out
    }

    /// Splits a rendering with placeholders into template text and placeholders.
    fn pieces<'a>(&self, marked: &'a str, chunks: usize) -> Result<Pieces<'a>> {
        let (first, mut rest) = marked.split_once(self.open).unwrap_or((marked, ""));
        let mut pieces = Pieces {
            first,
            rest: Vec::new(),
        };
        if first.len() < marked.len() {
            loop {
                let (index, after) = rest.split_once(self.close).ok_or_else(untraceable)?;
                let index = index
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i < chunks)
                    .ok_or_else(untraceable)?;
                match after.split_once(self.open) {
                    Some((template, next)) => {
                        pieces.rest.push((index, template));
                        rest = next;
                    }
                    None => {
                        pieces.rest.push((index, after));
                        break;
                    }
                }
            }
        }
        let mut templates = std::iter::once(first).chain(pieces.rest.iter().map(|&(_, t)| t));
        if templates.any(|t| t.contains(self.close)) {
            return Err(untraceable());
        }
        Ok(pieces)
    }

    /// The byte ranges of `text` (the real rendering) where `marked` (the rendering with
    /// placeholders) has placeholders.
    fn align(&self, text: &str, marked: &str, chunks: &[&str]) -> Result<Vec<Range<usize>>> {
        let pieces = self.pieces(marked, chunks.len())?;
        if !text.starts_with(pieces.first) {
            return Err(untraceable());
        }
        let mut at = pieces.first.len();
        let mut spans = Vec::new();
        let count = pieces.rest.len();
        for (j, &(k, template)) in pieces.rest.iter().enumerate() {
            let last = j + 1 == count;
            let followed = |end: usize| {
                if last {
                    &text[end..] == template
                } else {
                    text[end..].starts_with(template)
                }
            };
            let chunk = chunks[k];
            // The template wrote the message text as it is (the usual case), or changed it
            // (escaped it as JSON, say): then it ends where the template's next text
            // starts.
            let end = if text[at..].starts_with(chunk) && followed(at + chunk.len()) {
                at + chunk.len()
            } else if last {
                text.len()
                    .checked_sub(template.len())
                    .filter(|&e| e >= at && text.is_char_boundary(e) && followed(e))
                    .ok_or_else(untraceable)?
            } else if !template.is_empty() {
                at + text[at..].find(template).ok_or_else(untraceable)?
            } else {
                return Err(untraceable());
            };
            if end > at {
                spans.push(at..end);
            }
            at = end + template.len();
        }
        if at != text.len() {
            return Err(untraceable());
        }
        Ok(spans)
    }
}

fn untraceable() -> LlmError {
    LlmError::ChatTemplate {
        what: "the template cuts through message text that contains special-token text, so that text cannot be kept as text".into(),
    }
}
