//! `ChatMessage`: one turn of a conversation, with the tool calls an assistant made and
//! the call a tool result answers.

use crate::json::JsonValue;

/// One message: a role (`system`, `user`, `assistant`, `tool`, ...), its text and,
/// optionally, the author's name (OpenAI's `name`), the tool calls of an assistant turn,
/// the id of the call a `tool` message answers, and an assistant turn's reasoning.
/// Templates see the fields that are set (`message.name`, `message.tool_calls`,
/// `message.tool_call_id`, `message.reasoning_content`), as transformers passes them.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: String,
    /// What they say (a tool call turn without text: empty).
    pub content: String,
    /// The author's name, if given.
    pub name: Option<String>,
    /// The tool calls of an assistant turn.
    pub tool_calls: Vec<ToolCall>,
    /// The id of the tool call a `tool` message answers.
    pub tool_call_id: Option<String>,
    /// The reasoning of an assistant turn (what a reasoning model wrote in its
    /// `<think>` block).
    pub reasoning_content: Option<String>,
}

/// A function call an assistant made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call's id (what the `tool` message answering it names).
    pub id: String,
    /// The function.
    pub name: String,
    /// Its arguments (templates get them as an object, as transformers' documentation
    /// asks).
    pub arguments: JsonValue,
}

impl ChatMessage {
    /// A message from `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning_content: None,
        }
    }

    /// The same message with the author's `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same message with `calls` (an assistant turn).
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tool_calls = calls;
        self
    }

    /// The same message answering the tool call `id` (a `tool` message).
    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// The same message with an assistant turn's reasoning.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning_content = Some(reasoning.into());
        self
    }

    /// The message as a template sees it: `role`, `content`, then the fields that are
    /// set; with reasoning, `thinking` first and `reasoning_content` (transformers'
    /// aliases, for templates that read either).
    pub fn template_value(&self) -> JsonValue {
        let s = |v: &str| JsonValue::String(v.to_owned());
        let mut entries = Vec::with_capacity(6);
        if let Some(r) = &self.reasoning_content {
            entries.push(("thinking".to_owned(), s(r)));
        }
        entries.push(("role".to_owned(), s(&self.role)));
        entries.push(("content".to_owned(), s(&self.content)));
        if let Some(name) = &self.name {
            entries.push(("name".to_owned(), s(name)));
        }
        if !self.tool_calls.is_empty() {
            let calls = self
                .tool_calls
                .iter()
                .map(|c| {
                    JsonValue::Object(vec![
                        ("id".to_owned(), s(&c.id)),
                        ("type".to_owned(), s("function")),
                        (
                            "function".to_owned(),
                            JsonValue::Object(vec![
                                ("name".to_owned(), s(&c.name)),
                                ("arguments".to_owned(), c.arguments.clone()),
                            ]),
                        ),
                    ])
                })
                .collect();
            entries.push(("tool_calls".to_owned(), JsonValue::Array(calls)));
        }
        if let Some(id) = &self.tool_call_id {
            entries.push(("tool_call_id".to_owned(), s(id)));
        }
        if let Some(r) = &self.reasoning_content {
            entries.push(("reasoning_content".to_owned(), s(r)));
        }
        JsonValue::Object(entries)
    }
}
