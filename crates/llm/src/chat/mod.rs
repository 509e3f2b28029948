//! Chat templates: turning a conversation into the prompt text a model was trained on.
//!
//! GGUF files carry the template of their Hugging Face tokenizer in the metadata key
//! `tokenizer.chat_template` ([`CHAT_TEMPLATE_KEY`]), a Jinja template. [`ChatTemplate`]
//! renders it with `minijinja`, with the context Hugging Face's `apply_chat_template`
//! gives: `messages` (a list of `{role, content}`), `add_generation_prompt`,
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

mod message;
mod strftime;
mod template;

pub use message::ChatMessage;
pub use template::{CHAT_TEMPLATE_KEY, ChatTemplate, FALLBACK_TEMPLATE};
