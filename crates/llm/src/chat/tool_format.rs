//! `ToolFormat`: how a model writes tool calls, read from its chat template (as
//! llama.cpp's chat handlers tell the families apart), and whether it writes its
//! reasoning in `<think>` tags.
//!
//! - Hermes (Qwen 2.5, Qwen 3, Hermes 2 Pro/3, tempra's ChatML fallback):
//!   `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call.
//! - Llama 3.x: a JSON object `{"name": "f", "parameters": {...}}` as the whole reply
//!   (optionally after `<|python_tag|>`), one call.
//! - Mistral Nemo: `[TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "abcdef123"}]`.
//! - Harmony (gpt-oss): `<|channel|>commentary to=functions.f <|constrain|>json<|message|>
//!   {...}<|call|>`, one call per generation.

use crate::chat::harmony;
use crate::grammar::Trigger;

/// A model family's tool-call syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks.
    Hermes,
    /// `{"name": ..., "parameters": ...}` as the reply, optionally after
    /// `<|python_tag|>`.
    Llama3,
    /// `[TOOL_CALLS]` and a JSON array of `{"name", "arguments", "id"}`.
    MistralNemo,
    /// Harmony (gpt-oss): a commentary message addressed `to=functions.NAME` with the
    /// arguments as its body (see [`crate::chat::harmony`]).
    Harmony,
}

/// How a harmony call opens (the canonical order: channel, then recipient): the
/// trigger of a lazy call grammar.
pub(crate) const HARMONY_CALL_OPEN: &str = "<|channel|>commentary to=functions.";

/// The tag that opens a reasoning block.
pub const THINK_OPEN: &str = "<think>";
/// The tag that closes a reasoning block.
pub const THINK_CLOSE: &str = "</think>";

impl ToolFormat {
    /// The format of a template that renders tool calls, from its source; `None` for
    /// templates that do not.
    pub fn detect(template_source: &str) -> Option<ToolFormat> {
        if template_source.contains(harmony::CHANNEL) {
            Some(ToolFormat::Harmony)
        } else if template_source.contains("[TOOL_CALLS]") {
            Some(ToolFormat::MistralNemo)
        } else if template_source.contains("<tool_call>") {
            Some(ToolFormat::Hermes)
        } else if template_source.contains("<|python_tag|>")
            || template_source.contains("ipython<|end_header_id|>")
        {
            Some(ToolFormat::Llama3)
        } else {
            None
        }
    }

    /// The marker texts of the format: tokens with these texts are rendered as text in
    /// the output (so the parser and the grammar see them), even when the vocabulary
    /// has them as control tokens.
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            ToolFormat::Hermes => &["<tool_call>", "</tool_call>"],
            ToolFormat::Llama3 => &["<|python_tag|>"],
            ToolFormat::MistralNemo => &["[TOOL_CALLS]"],
            ToolFormat::Harmony => &harmony::MARKERS,
        }
    }

    /// What starts a tool call in free output (`tool_choice: "auto"`): from there on the
    /// call grammar holds the output.
    pub fn triggers(self) -> Vec<Trigger> {
        match self {
            ToolFormat::Hermes => vec![Trigger::Word(b"<tool_call>".to_vec())],
            ToolFormat::Llama3 => vec![
                Trigger::Word(b"<|python_tag|>".to_vec()),
                Trigger::Start(b"{".to_vec()),
            ],
            ToolFormat::MistralNemo => vec![Trigger::Word(b"[TOOL_CALLS]".to_vec())],
            ToolFormat::Harmony => vec![Trigger::Word(HARMONY_CALL_OPEN.as_bytes().to_vec())],
        }
    }

    /// Whether the format has room for several calls in one reply.
    pub fn allows_parallel(self) -> bool {
        // A harmony call ends the generation (`<|call|>`).
        !matches!(self, ToolFormat::Llama3 | ToolFormat::Harmony)
    }

    /// The key of the arguments object in a call.
    pub(crate) fn arguments_key(self) -> &'static str {
        match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }

    /// Whether call ids are part of the output (Mistral's nine characters).
    pub fn writes_ids(self) -> bool {
        matches!(self, ToolFormat::MistralNemo)
    }
}

/// Whether a template renders reasoning in `<think>` tags (Qwen 3, QwQ, DeepSeek R1
/// distills): the output may start with a reasoning block.
pub fn has_reasoning_tags(template_source: &str) -> bool {
    template_source.contains(THINK_CLOSE)
}

/// Whether `prompt` (rendered with the generation prompt) leaves a reasoning block open:
/// the output starts inside it.
pub fn opens_reasoning(prompt: &str) -> bool {
    prompt.trim_end().ends_with(THINK_OPEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_families() {
        let read = |f: &str| {
            std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/data/chat_templates")
                    .join(f),
            )
            .expect("template")
        };
        assert_eq!(
            ToolFormat::detect(&read("qwen2.5-tools.jinja")),
            Some(ToolFormat::Hermes)
        );
        assert_eq!(
            ToolFormat::detect(&read("qwen3.jinja")),
            Some(ToolFormat::Hermes)
        );
        assert_eq!(
            ToolFormat::detect(&read("hermes2-pro-tools.jinja")),
            Some(ToolFormat::Hermes)
        );
        assert_eq!(
            ToolFormat::detect(&read("llama3.1-tools.jinja")),
            Some(ToolFormat::Llama3)
        );
        assert_eq!(
            ToolFormat::detect(&read("mistral-nemo.jinja")),
            Some(ToolFormat::MistralNemo)
        );
        assert_eq!(ToolFormat::detect(&read("llama2.jinja")), None);
        assert_eq!(
            ToolFormat::detect(&read("gpt-oss.jinja")),
            Some(ToolFormat::Harmony)
        );
        assert!(!has_reasoning_tags(&read("gpt-oss.jinja")));
        assert!(has_reasoning_tags(&read("qwen3.jinja")));
        assert!(!has_reasoning_tags(&read("qwen2.5-tools.jinja")));
        assert!(opens_reasoning("<|im_start|>assistant\n<think>\n"));
        assert!(!opens_reasoning(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        ));
    }
}
