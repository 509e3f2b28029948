//! Replies read into reasoning, content and tool calls: the whole message of a
//! non-streamed response, and the deltas of a streamed one (`delta.reasoning_content`,
//! `delta.content`, `delta.tool_calls` as OpenAI streams them: a call's id, type and name
//! first with empty arguments, then its arguments in pieces).

use serde_json::{Map, Value, json};
use tempra_tensor::random::SplitMix64;

use crate::chat::{ParsedReply, ReplyParser, ToolFormat};

/// The ids of a reply's calls: the model's own (Mistral writes them), else made from the
/// response id and the call's index (nine letters and digits for Mistral's format, which
/// needs them when the call comes back in a later request; `call_` and 24 otherwise).
pub(crate) fn call_ids(
    reply: &ParsedReply,
    format: Option<ToolFormat>,
    response_id: &str,
) -> Vec<String> {
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let seed = response_id.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    reply
        .calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            if let Some(id) = &call.id {
                return id.clone();
            }
            let mut rng =
                SplitMix64::new(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mistral = format == Some(ToolFormat::MistralNemo);
            let n = if mistral { 9 } else { 24 };
            let tail: String = (0..n)
                .map(|_| ALNUM[(rng.next_u64() % ALNUM.len() as u64) as usize] as char)
                .collect();
            if mistral {
                tail
            } else {
                format!("call_{tail}")
            }
        })
        .collect()
}

/// The assistant message of a reply: `content` (null when there is none but calls),
/// `reasoning_content` when there is some, `tool_calls` when there are calls.
pub(crate) fn message(reply: &ParsedReply, ids: &[String]) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    let content = if reply.content.is_empty() && !reply.calls.is_empty() {
        Value::Null
    } else {
        reply.content.clone().into()
    };
    m.insert("content".into(), content);
    if !reply.reasoning.is_empty() {
        m.insert("reasoning_content".into(), reply.reasoning.clone().into());
    }
    if !reply.calls.is_empty() {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .zip(ids)
            .map(|(c, id)| {
                json!({"id": id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        m.insert("tool_calls".into(), calls.into());
    }
    Value::Object(m)
}

/// A streamed reply: the text so far and how much of its parse was sent.
#[derive(Debug)]
pub(crate) struct ReplyStream {
    parser: ReplyParser,
    format: Option<ToolFormat>,
    response_id: String,
    text: String,
    reasoning_sent: usize,
    content_sent: usize,
    /// Per call: its arguments' bytes sent (the call was announced).
    calls_sent: Vec<usize>,
}

impl ReplyStream {
    /// A stream of a reply read by `parser`.
    pub(crate) fn new(
        parser: ReplyParser,
        format: Option<ToolFormat>,
        response_id: &str,
    ) -> ReplyStream {
        ReplyStream {
            parser,
            format,
            response_id: response_id.to_owned(),
            text: String::new(),
            reasoning_sent: 0,
            content_sent: 0,
            calls_sent: Vec::new(),
        }
    }

    /// Adds generated text; returns the deltas it completes.
    pub(crate) fn push(&mut self, piece: &str) -> Vec<Value> {
        self.text.push_str(piece);
        let reply = self.parser.parse(&self.text, false);
        self.deltas(&reply)
    }

    /// The end of the reply: the last deltas and the whole parse (with call ids).
    pub(crate) fn finish(&mut self) -> (Vec<Value>, ParsedReply) {
        let reply = self.parser.parse(&self.text, true);
        (self.deltas(&reply), reply)
    }

    fn deltas(&mut self, reply: &ParsedReply) -> Vec<Value> {
        let mut out = Vec::new();
        if reply.reasoning.len() > self.reasoning_sent {
            out.push(json!({"reasoning_content": &reply.reasoning[self.reasoning_sent..]}));
            self.reasoning_sent = reply.reasoning.len();
        }
        if reply.content.len() > self.content_sent {
            out.push(json!({"content": &reply.content[self.content_sent..]}));
            self.content_sent = reply.content.len();
        }
        let ids = call_ids(reply, self.format, &self.response_id);
        for (i, call) in reply.calls.iter().enumerate() {
            if i == self.calls_sent.len() {
                out.push(json!({"tool_calls": [{"index": i, "id": ids[i], "type": "function",
                                                "function": {"name": call.name, "arguments": ""}}]}));
                self.calls_sent.push(0);
            }
            let sent = self.calls_sent[i];
            if call.arguments.len() > sent {
                out.push(json!({"tool_calls": [{"index": i,
                                                "function": {"arguments": &call.arguments[sent..]}}]}));
                self.calls_sent[i] = call.arguments.len();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_add_up_to_the_message() {
        let parser = ReplyParser {
            tools: Some(ToolFormat::Hermes),
            reasoning: true,
            open_reasoning: false,
            harmony: false,
        };
        let text = "<think>Plan.</think>\nOk.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>";
        let mut stream = ReplyStream::new(parser, Some(ToolFormat::Hermes), "chatcmpl-7");
        let mut deltas = Vec::new();
        for c in text.chars() {
            deltas.extend(stream.push(&c.to_string()));
        }
        let (last, reply) = stream.finish();
        deltas.extend(last);
        let (mut reasoning, mut content, mut args, mut names) =
            (String::new(), String::new(), String::new(), Vec::new());
        for d in &deltas {
            reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
            content.push_str(d["content"].as_str().unwrap_or(""));
            if let Some(calls) = d["tool_calls"].as_array() {
                names.extend(calls[0]["function"]["name"].as_str().map(str::to_owned));
                args.push_str(calls[0]["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        let ids = call_ids(&reply, Some(ToolFormat::Hermes), "chatcmpl-7");
        let m = message(&reply, &ids);
        assert_eq!(reasoning, m["reasoning_content"]);
        assert_eq!(content, m["content"]);
        assert_eq!(names, ["f"]);
        assert_eq!(args, m["tool_calls"][0]["function"]["arguments"]);
        assert!(ids[0].starts_with("call_") && ids[0].len() == 29);
        assert_eq!(
            ids,
            call_ids(&reply, Some(ToolFormat::Hermes), "chatcmpl-7")
        );
        let mistral = call_ids(&reply, Some(ToolFormat::MistralNemo), "x");
        assert!(mistral[0].len() == 9 && mistral[0].bytes().all(|b| b.is_ascii_alphanumeric()));
    }
}
