//! Chat templates: turning a conversation into the prompt text a model was trained on.
//!
//! GGUF files carry the template of their Hugging Face tokenizer in the metadata key
//! `tokenizer.chat_template` ([`CHAT_TEMPLATE_KEY`]), a Jinja template. [`ChatTemplate`]
//! renders it with `minijinja`, with the context Hugging Face's `apply_chat_template`
//! gives: `messages` (a list of `{role, content}`, plus `name` where one is set),
//! `add_generation_prompt`,
//! `bos_token`, `eos_token` and a `raise_exception(message)` function, plus Python string
//! methods (`.strip()`, `.startswith()`, ...) and `strftime_now(format)`. As in
//! Hugging Face, blocks trim the newline after them and leading whitespace before them
//! (`trim_blocks`, `lstrip_blocks`).
//!
//! A model without a template gets [`FALLBACK_TEMPLATE`] (ChatML, as llama.cpp falls
//! back to): `<|im_start|>role\ncontent<|im_end|>\n` per message. Its end marker is also
//! a stop string ([`ChatTemplate::stop_strings`]) for vocabularies where it is not a
//! token.
//!
//! Message text stays text: [`ChatTemplate::render_prompt`] and
//! [`ChatTemplate::prompt_tokens`] tokenize the template's own control tokens as
//! tokens and control-token text inside messages (`<|im_end|>` typed by a user) as plain
//! text, stricter than llama.cpp, which parses it ([`RenderedPrompt`] says how).
//!
//! ```
//! use tempra_llm::chat::{ChatMessage, ChatTemplate};
//!
//! let template = ChatTemplate::new(
//!     "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}\
//!      {% if add_generation_prompt %}[assistant] {% endif %}",
//!     "<s>",
//!     "</s>",
//! )?;
//! let prompt = template.render(&[ChatMessage::new("user", "Hi!")], true)?;
//! assert_eq!(prompt, "[user] Hi!\n[assistant] ");
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

pub mod harmony;
mod json_scan;
mod message;
mod output_grammar;
mod prompt;
mod pyjson;
mod reply_parser;
mod strftime;
mod template;
mod tool_format;

pub use message::{ChatMessage, ToolCall};
pub use output_grammar::{FunctionSpec, OutputTarget, Thinking, output_grammar};
pub use prompt::RenderedPrompt;
pub use reply_parser::{ParsedCall, ParsedReply, ReplyParser};
pub use template::{CHAT_TEMPLATE_KEY, ChatTemplate, FALLBACK_TEMPLATE, TemplateInputs};
pub use tool_format::{THINK_CLOSE, THINK_OPEN, ToolFormat, has_reasoning_tags, opens_reasoning};
