//! `ReplyParser`: a model's reply split into reasoning, content and tool calls, while it
//! streams and when it is done.
//!
//! Parsing a prefix of a reply gives a prefix of what parsing more of it gives (each
//! string grows, calls are only added, a call's arguments only grow), so a stream can
//! send the difference after every token and the pieces add up to the final parse:
//! text that could still be the start of a marker (`<tool_ca`, `</thi`) or trailing
//! whitespace is held back until the rest shows what it is; a call is announced once its
//! name is complete, and its arguments stream as the raw JSON text the model writes.
//! Reasoning and content are trimmed of surrounding whitespace.

use crate::chat::harmony;
use crate::chat::json_scan::{self, Scan};
use crate::chat::tool_format::{THINK_CLOSE, THINK_OPEN, ToolFormat};

/// How to read replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyParser {
    /// The tool-call syntax to look for (`None`: the reply is content).
    pub tools: Option<ToolFormat>,
    /// Whether a reply may start with a `<think>` block.
    pub reasoning: bool,
    /// Whether the prompt opened the block (the reply starts inside it).
    pub open_reasoning: bool,
    /// Whether the reply is harmony messages (gpt-oss): the analysis channel is the
    /// reasoning, the final channel the content and, with `tools` Harmony, commentary
    /// messages to a function the calls (see [`crate::chat::harmony`]); `reasoning` and
    /// `open_reasoning` do not apply.
    pub harmony: bool,
}

/// A reply, split.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedReply {
    /// The reasoning (the `<think>` block's text).
    pub reasoning: String,
    /// The content (text outside reasoning and calls).
    pub content: String,
    /// The tool calls.
    pub calls: Vec<ParsedCall>,
}

/// One tool call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedCall {
    /// The function.
    pub name: String,
    /// The id the model wrote (Mistral), if any.
    pub id: Option<String>,
    /// The arguments as the JSON text the model wrote (so far).
    pub arguments: String,
    /// Whether the call is complete.
    pub complete: bool,
}

/// `text` without the longest end that is a proper prefix of `marker`.
pub(crate) fn hold_marker<'t>(text: &'t str, marker: &str) -> &'t str {
    for len in (1..marker.len()).rev() {
        if text.len() >= len
            && text.is_char_boundary(text.len() - len)
            && marker.starts_with(&text[text.len() - len..])
        {
            return &text[..text.len() - len];
        }
    }
    text
}

impl ReplyParser {
    /// Splits `text`, the reply so far (`done`: all of it).
    pub fn parse(&self, text: &str, done: bool) -> ParsedReply {
        if self.harmony {
            return harmony::parse(text, done, self.tools == Some(ToolFormat::Harmony));
        }
        let mut out = ParsedReply::default();
        let mut body_start = 0;
        if self.reasoning {
            let start = if self.open_reasoning {
                Some(0)
            } else {
                let ws = json_scan::skip_ws(text, 0);
                let rest = &text[ws..];
                if rest.starts_with(THINK_OPEN) {
                    Some(ws + THINK_OPEN.len())
                } else if !done && THINK_OPEN.starts_with(rest) {
                    // Nothing yet, or the opening tag is on its way.
                    return out;
                } else {
                    None
                }
            };
            if let Some(start) = start {
                match text[start..].find(THINK_CLOSE) {
                    Some(k) => {
                        out.reasoning = text[start..start + k].trim().to_owned();
                        body_start = start + k + THINK_CLOSE.len();
                    }
                    None => {
                        let r = &text[start..];
                        let r = if done { r } else { hold_marker(r, THINK_CLOSE) };
                        out.reasoning = r.trim().to_owned();
                        return out;
                    }
                }
            }
        }
        let body = &text[body_start..];
        match self.tools {
            None => out.content = body.trim().to_owned(),
            Some(ToolFormat::Hermes) => {
                self.blocks(body, done, "<tool_call>", "</tool_call>", &mut out)
            }
            Some(ToolFormat::MistralNemo) => self.array(body, done, &mut out),
            Some(ToolFormat::Llama3) => self.llama(body, done, &mut out),
            // Harmony replies are parsed whole above; as a plain format it has no calls.
            Some(ToolFormat::Harmony) => out.content = body.trim().to_owned(),
        }
        out
    }

    /// A call from an object's fields (`None` until the name is complete).
    fn call(
        text: &str,
        fields: &[json_scan::Field],
        args_key: &str,
        complete: bool,
    ) -> Option<ParsedCall> {
        let mut fields = fields.iter();
        let mut first = fields.next()?;
        if first.key == "type" {
            first = fields.next()?;
        }
        if first.key != "name" {
            return None;
        }
        let end = first.end?;
        let name = serde_json::from_str::<String>(&text[first.start..end]).ok()?;
        let mut call = ParsedCall {
            name,
            complete,
            ..ParsedCall::default()
        };
        for f in fields {
            if f.key == args_key || f.key == "arguments" || f.key == "parameters" {
                let raw = &text[f.start..f.end.unwrap_or(text.len())];
                call.arguments = if raw.starts_with('"') {
                    // Arguments written as a JSON string holding JSON: its text once whole.
                    f.end
                        .and_then(|_| serde_json::from_str::<String>(raw).ok())
                        .unwrap_or_default()
                } else {
                    raw.to_owned()
                };
            } else if f.key == "id"
                && let Some(end) = f.end
            {
                call.id = serde_json::from_str::<String>(&text[f.start..end]).ok();
            }
        }
        Some(call)
    }

    /// Whether an object whose fields are still arriving may yet turn out to be a call
    /// (its name has not arrived).
    fn may_be_call(fields: &[json_scan::Field]) -> bool {
        match fields {
            [] => true,
            [first, ..] if first.end.is_none() => first.key == "name" || first.key == "type",
            [first] => first.key == "type",
            [first, second, ..] => {
                first.key == "type" && second.key == "name" && second.end.is_none()
            }
        }
    }

    /// Hermes: `<tool_call>{...}</tool_call>` blocks among content.
    fn blocks(&self, body: &str, done: bool, open: &str, close: &str, out: &mut ParsedReply) {
        let mut content = String::new();
        let mut i = 0;
        loop {
            let Some(m) = body[i..].find(open).map(|m| i + m) else {
                let rest = &body[i..];
                content.push_str(if done { rest } else { hold_marker(rest, open) });
                break;
            };
            content.push_str(&body[i..m]);
            let j = json_scan::skip_ws(body, m + open.len());
            let (fields, scan) = json_scan::object_fields(body, j);
            let call = Self::call(body, &fields, "arguments", matches!(scan, Scan::Done(_)));
            match (scan, call) {
                (Scan::Done(end), Some(call)) => {
                    out.calls.push(call);
                    let k = json_scan::skip_ws(body, end);
                    if body[k..].starts_with(close) {
                        i = k + close.len();
                    } else if !done && close.starts_with(&body[k..]) {
                        break;
                    } else {
                        i = k;
                    }
                }
                (Scan::Partial, Some(call)) => {
                    out.calls.push(call);
                    break;
                }
                (Scan::Partial, None) if !done && Self::may_be_call(&fields) => break,
                (Scan::Invalid, Some(call)) => {
                    // Broken after the name: keep the call (its header may have streamed).
                    out.calls.push(ParsedCall {
                        complete: false,
                        ..call
                    });
                    break;
                }
                _ => {
                    // Not a call: the marker is content.
                    content.push_str(&body[m..m + open.len()]);
                    i = m + open.len();
                }
            }
        }
        out.content = content.trim().to_owned();
    }

    /// Mistral Nemo: content, then `[TOOL_CALLS]` and an array of calls.
    fn array(&self, body: &str, done: bool, out: &mut ParsedReply) {
        let marker = "[TOOL_CALLS]";
        let Some(m) = body.find(marker) else {
            out.content = if done {
                body
            } else {
                hold_marker(body, marker)
            }
            .trim()
            .to_owned();
            return;
        };
        out.content = body[..m].trim().to_owned();
        let mut j = json_scan::skip_ws(body, m + marker.len());
        if body.as_bytes().get(j) != Some(&b'[') {
            if done || j < body.len() {
                out.content = body.trim().to_owned();
            }
            return;
        }
        j += 1;
        loop {
            j = json_scan::skip_ws(body, j);
            let (fields, scan) = json_scan::object_fields(body, j);
            match Self::call(body, &fields, "arguments", matches!(scan, Scan::Done(_))) {
                Some(call) => out.calls.push(call),
                None => return,
            }
            let Scan::Done(end) = scan else { return };
            j = json_scan::skip_ws(body, end);
            match body.as_bytes().get(j) {
                Some(b',') => j += 1,
                _ => return,
            }
        }
    }

    /// Llama 3.x: the reply is one call (`{"name": ..., "parameters": ...}`, optionally
    /// after `<|python_tag|>`), or content.
    fn llama(&self, body: &str, done: bool, out: &mut ParsedReply) {
        let tag = "<|python_tag|>";
        let ws = json_scan::skip_ws(body, 0);
        let rest = &body[ws..];
        let j = if rest.starts_with(tag) {
            json_scan::skip_ws(body, ws + tag.len())
        } else if !done && tag.starts_with(rest) {
            return;
        } else {
            ws
        };
        if !body[j..].starts_with('{') {
            if !done && j == body.len() {
                return;
            }
            out.content = body.trim().to_owned();
            return;
        }
        let (fields, scan) = json_scan::object_fields(body, j);
        match Self::call(body, &fields, "parameters", matches!(scan, Scan::Done(_))) {
            Some(call) => {
                out.calls.push(call);
                if let Scan::Done(end) = scan {
                    out.content = body[end..].trim().to_owned();
                }
            }
            None if !done && matches!(scan, Scan::Partial) && Self::may_be_call(&fields) => {}
            None => out.content = body.trim().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_prefixes(p: &ReplyParser, text: &str) -> ParsedReply {
        // Every prefix parses to a prefix of the next, and of the final parse.
        let finals = p.parse(text, true);
        let mut last = ParsedReply::default();
        for (end, _) in text.char_indices().chain([(text.len(), ' ')]) {
            let now = p.parse(&text[..end], false);
            for (a, b) in [(&last, &now), (&now, &finals)] {
                assert!(
                    b.reasoning.starts_with(&a.reasoning),
                    "{:?} -> {:?} at {end}",
                    a,
                    b
                );
                assert!(
                    b.content.starts_with(&a.content),
                    "{:?} -> {:?} at {end} of {text:?}",
                    a,
                    b
                );
                assert!(b.calls.len() >= a.calls.len(), "{a:?} -> {b:?}");
                for (x, y) in a.calls.iter().zip(&b.calls) {
                    assert_eq!(x.name, y.name);
                    assert!(y.arguments.starts_with(&x.arguments), "{x:?} -> {y:?}");
                }
            }
            last = now;
        }
        finals
    }

    fn parser(tools: Option<ToolFormat>, reasoning: bool) -> ReplyParser {
        ReplyParser {
            tools,
            reasoning,
            open_reasoning: false,
            harmony: false,
        }
    }

    #[test]
    fn hermes_calls_and_reasoning() {
        let p = parser(Some(ToolFormat::Hermes), true);
        let text = "<think>\nI should look.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"a}\"}}\n</tool_call>";
        let r = check_prefixes(&p, text);
        assert_eq!(r.reasoning, "I should look.");
        assert_eq!(r.content, "Let me check.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, "{\"city\": \"Paris\", \"n\": [1, 2]}");
        assert_eq!(r.calls[1].arguments, "{\"q\": \"a}\"}");
        assert!(r.calls.iter().all(|c| c.complete));
        // A marker that leads to no call is content.
        let r = check_prefixes(&p, "a <tool_call> not json");
        assert_eq!(r.content, "a <tool_call> not json");
        assert!(r.calls.is_empty());
        // Reasoning left open by the prompt.
        let open = ReplyParser {
            open_reasoning: true,
            ..p
        };
        let r = check_prefixes(&open, "thinking...</think>\nanswer");
        assert_eq!(
            (r.reasoning.as_str(), r.content.as_str()),
            ("thinking...", "answer")
        );
        // No think block: all content.
        let r = check_prefixes(&p, "  plain answer  ");
        assert_eq!(
            (r.reasoning.as_str(), r.content.as_str()),
            ("", "plain answer")
        );
    }

    #[test]
    fn mistral_and_llama_calls() {
        let p = parser(Some(ToolFormat::MistralNemo), false);
        let r = check_prefixes(
            &p,
            "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abcDEF123\"}, {\"name\": \"g\", \"arguments\": \"{\\\"b\\\": 2}\"}]",
        );
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].id.as_deref(), Some("abcDEF123"));
        assert_eq!(r.calls[0].arguments, "{\"a\": 1}");
        assert_eq!(r.calls[1].arguments, "{\"b\": 2}");
        let p = parser(Some(ToolFormat::Llama3), false);
        let r = check_prefixes(
            &p,
            "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": \"y\"}}",
        );
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_str()),
            ("f", "{\"x\": \"y\"}")
        );
        let r = check_prefixes(
            &p,
            "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}",
        );
        assert_eq!(r.calls[0].name, "f");
        let r = check_prefixes(&p, "{\"answer\": 42}");
        assert!(r.calls.is_empty());
        assert_eq!(r.content, "{\"answer\": 42}");
        let r = check_prefixes(&p, "Just text.");
        assert_eq!(r.content, "Just text.");
    }

    #[test]
    fn harmony_channels_and_calls() {
        let p = ReplyParser {
            harmony: true,
            ..parser(Some(ToolFormat::Harmony), false)
        };
        // Reasoning, a preamble, then a call with the channel first (the grammar's order).
        let text = "<|channel|>analysis<|message|>Need the weather.<|end|>\
                    <|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>\
                    <|start|>assistant<|channel|>commentary to=functions.get_weather \
                    <|constrain|>json<|message|>{\"city\": \"Paris <|x\"}<|call|>";
        let r = check_prefixes(&p, text);
        assert_eq!(r.reasoning, "Need the weather.");
        assert_eq!(r.content, "Checking.");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, "{\"city\": \"Paris <|x\"}");
        assert!(r.calls[0].complete);
        // The recipient before the channel, as the template renders calls.
        let r = check_prefixes(
            &p,
            " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>",
        );
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_str()),
            ("f", "{\"a\": 1}")
        );
        // Two analysis messages and a final answer ended by <|return|>.
        let r = check_prefixes(
            &p,
            "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis\
             <|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
        );
        assert_eq!(
            (r.reasoning.as_str(), r.content.as_str()),
            ("One.\nTwo.", "Answer.")
        );
        assert!(r.calls.is_empty());
        // A call cut short stays a call, incomplete.
        let r = check_prefixes(
            &p,
            "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1,",
        );
        assert!(!r.calls[0].complete);
        assert_eq!(r.calls[0].arguments, "{\"a\": [1,");
        // The generation's end token `<|call|>` is not text: whole arguments complete it.
        let r = check_prefixes(
            &p,
            "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1]}",
        );
        assert!(r.calls[0].complete);
        // Without tools a call's body is content; a reply without headers is content.
        let no_tools = ReplyParser { tools: None, ..p };
        let r = check_prefixes(
            &no_tools,
            "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
        );
        assert_eq!((r.content.as_str(), r.calls.len()), ("{}", 0));
        let r = check_prefixes(&no_tools, "  Plain text, no channel.  ");
        assert_eq!(r.content, "Plain text, no channel.");
        let r = check_prefixes(
            &no_tools,
            "Hi<|start|>assistant<|channel|>final<|message|>There.",
        );
        assert_eq!(r.content, "Hi\nThere.");
    }

    #[test]
    fn cut_calls_stay_calls() {
        let p = parser(Some(ToolFormat::Hermes), false);
        let r = check_prefixes(
            &p,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1,",
        );
        assert_eq!(r.calls.len(), 1);
        assert!(!r.calls[0].complete);
        assert_eq!(r.calls[0].arguments, "{\"a\": [1,");
    }
}
