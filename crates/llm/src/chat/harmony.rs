//! OpenAI's harmony format (gpt-oss): a reply is a sequence of messages, each a header
//! naming its channel (and, for a tool call, its recipient) and a body.
//!
//! ```text
//! <|channel|>analysis<|message|>Reasoning.<|end|>
//! <|start|>assistant<|channel|>final<|message|>The answer.<|return|>
//! <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//! ```
//!
//! The `analysis` channel is the reasoning, `final` the content, and a `commentary`
//! message addressed `to=functions.NAME` (in its header, before or after the channel) a
//! call of `NAME` with the body as its arguments; a commentary message without a
//! recipient (a preamble to the user) is content. `<|return|>` and `<|call|>` end the
//! generation; `<|end|>` ends a message.

use crate::chat::reply_parser::{ParsedCall, ParsedReply, hold_marker};

/// Opens a message after the first (followed by the role).
pub const START: &str = "<|start|>";
/// Opens the channel name in a header.
pub const CHANNEL: &str = "<|channel|>";
/// Ends a header: the body follows.
pub const MESSAGE: &str = "<|message|>";
/// Ends a message.
pub const END: &str = "<|end|>";
/// Ends a tool call (and the generation).
pub const CALL: &str = "<|call|>";
/// Ends the final message (and the generation).
pub const RETURN: &str = "<|return|>";
/// Names the format of a call's arguments in its header (`<|constrain|>json`).
pub const CONSTRAIN: &str = "<|constrain|>";
/// The recipient prefix of a function call in a header.
pub const FUNCTIONS: &str = "to=functions.";

/// The markers inside a harmony reply, rendered as text so the parser and grammars see
/// them (`<|call|>` and `<|return|>` end the generation instead: a finished reply
/// usually ends without them).
pub const MARKERS: [&str; 5] = [START, CHANNEL, MESSAGE, END, CONSTRAIN];

/// What a message's header says.
#[derive(Debug, PartialEq, Eq)]
struct Header<'t> {
    /// The channel (`analysis`, `commentary`, `final`), if named.
    channel: Option<&'t str>,
    /// The function a call is addressed to.
    function: Option<&'t str>,
}

/// Reads a header (the text between a message's start and `<|message|>`).
fn header(text: &str) -> Header<'_> {
    fn word(from: &str) -> &str {
        let end = from
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(from.len());
        &from[..end]
    }
    Header {
        channel: text.find(CHANNEL).map(|i| word(&text[i + CHANNEL.len()..])),
        function: text
            .find(FUNCTIONS)
            .map(|i| word(&text[i + FUNCTIONS.len()..]))
            .filter(|name| !name.is_empty()),
    }
}

/// The first of `markers` in `text`: its position and length.
fn first_of(text: &str, markers: &[&str]) -> Option<(usize, usize)> {
    markers
        .iter()
        .filter_map(|m| text.find(m).map(|i| (i, m.len())))
        .min()
}

/// `text` without an end that could still grow into one of `markers`.
fn hold_any<'t>(text: &'t str, markers: &[&str]) -> &'t str {
    markers
        .iter()
        .map(|m| hold_marker(text, m))
        .min_by_key(|held| held.len())
        .unwrap_or(text)
}

/// Splits `text`, a harmony reply so far (`done`: all of it): analysis messages into
/// the reasoning, final messages and preambles into the content, and, when `calls`,
/// commentary messages addressed to a function into calls (else their bodies are
/// content). Pieces of one kind join with a newline; reasoning and content are trimmed.
/// A body still arriving is held back where its end could be the start of a marker,
/// and a call appears once its header is whole; it is complete at `<|call|>`, or at
/// the end of a finished reply whose arguments are whole JSON.
pub(crate) fn parse(text: &str, done: bool, calls: bool) -> ParsedReply {
    let mut reasoning: Vec<&str> = Vec::new();
    let mut content: Vec<&str> = Vec::new();
    let mut out = ParsedReply::default();
    let mut pos = 0;
    while pos < text.len() {
        let rest = &text[pos..];
        let plain = rest.trim_start();
        let in_header = [START, CHANNEL, "to="].iter().any(|m| plain.starts_with(m))
            || [START, CHANNEL, FUNCTIONS]
                .iter()
                .any(|m| m.starts_with(plain));
        if !in_header {
            // Text outside any message (a model that writes no header): content, up to
            // the next message.
            let cut = first_of(rest, &[START, CHANNEL]).map_or(rest.len(), |(i, _)| i);
            let piece = &rest[..cut];
            content.push(if done || cut < rest.len() {
                piece
            } else {
                hold_any(
                    piece,
                    &[START, CHANNEL, MESSAGE, END, CALL, RETURN, CONSTRAIN],
                )
            });
            pos += cut;
            continue;
        }
        let Some(body_at) = rest.find(MESSAGE) else {
            // The header is on its way.
            break;
        };
        let head = header(&rest[..body_at]);
        let body_start = body_at + MESSAGE.len();
        let body_rest = &rest[body_start..];
        let end = first_of(body_rest, &[END, CALL, RETURN]);
        let body = match end {
            Some((i, _)) => &body_rest[..i],
            None if done => body_rest,
            None => hold_any(body_rest, &[END, CALL, RETURN]),
        };
        match (head.channel, head.function) {
            (_, Some(name)) if calls => out.calls.push(ParsedCall {
                name: name.to_owned(),
                id: None,
                arguments: body.trim().to_owned(),
                // `<|call|>` ends the generation, so a finished reply may not show it:
                // a call is also complete when it ends with whole JSON arguments.
                complete: end.is_some()
                    || (done && serde_json::from_str::<serde_json::Value>(body).is_ok()),
            }),
            (Some("analysis"), _) => reasoning.push(body),
            _ => content.push(body),
        }
        match end {
            Some((i, len)) => pos += body_start + i + len,
            None => break,
        }
    }
    out.reasoning = reasoning.join("\n").trim().to_owned();
    out.content = content.join("\n").trim().to_owned();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_channel_and_function_in_either_order() {
        assert_eq!(
            header("<|channel|>commentary to=functions.get_weather <|constrain|>json"),
            Header {
                channel: Some("commentary"),
                function: Some("get_weather"),
            }
        );
        assert_eq!(
            header(" to=functions.f<|channel|>commentary json"),
            Header {
                channel: Some("commentary"),
                function: Some("f"),
            }
        );
        assert_eq!(
            header("<|channel|>final"),
            Header {
                channel: Some("final"),
                function: None,
            }
        );
    }
}
