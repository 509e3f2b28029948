//! `ChatTemplate`: a model's Jinja chat template, compiled once and rendered per request.

use minijinja::{Environment, Error, ErrorKind, Value};

use crate::chat::message::ChatMessage;
use crate::chat::pyjson::tojson;
use crate::chat::strftime::strftime_now;
use crate::error::{LlmError, Result};
use crate::gguf::Metadata;
use crate::json::JsonValue;
use crate::tokenizer::Vocabulary;

/// The GGUF metadata key holding the model's chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The template used when a model has none: ChatML, as llama.cpp falls back to
/// (`<|im_start|>role\ncontent<|im_end|>\n` per message), with tools as Qwen 2.5 writes
/// them: a system block listing them, assistant calls in `<tool_call>` blocks and tool
/// results in `<tool_response>` blocks of a user turn.
pub const FALLBACK_TEMPLATE: &str = "{% if tools %}{{ '<|im_start|>system\\n' }}\
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}\
{{ '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n\
You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}\
{% for tool in tools %}{{ '\\n' + tool | tojson }}{% endfor %}\
{{ '\\n</tools>\\n\\nFor each function call, return a json object with function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n\
{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}\
{% endif %}\
{% for message in messages %}\
{% if tools and loop.first and message['role'] == 'system' %}\
{% elif message['role'] == 'assistant' and message.tool_calls %}\
{{ '<|im_start|>assistant' }}{% if message['content'] %}{{ '\\n' + message['content'] }}{% endif %}\
{% for call in message.tool_calls %}{{ '\\n<tool_call>\\n{\"name\": \"' + call.function.name + \
'\", \"arguments\": ' + call.function.arguments | tojson + '}\\n</tool_call>' }}{% endfor %}\
{{ '<|im_end|>\\n' }}\
{% elif message['role'] == 'tool' %}\
{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}\
{% else %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\
{% endif %}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The name the template is stored under in its environment.
const NAME: &str = "chat";

/// What a template gets besides the messages, as transformers'
/// `apply_chat_template(..., tools=..., **kwargs)` passes it: the tool definitions
/// (OpenAI's `{"type": "function", "function": {...}}` objects; `tools` is `none`
/// without them) and keyword arguments such as `enable_thinking`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TemplateInputs {
    /// The tools, in the caller's key order.
    pub tools: Option<Vec<JsonValue>>,
    /// Extra template variables (`enable_thinking`, `date_string`, ...); names the
    /// template context already has (`messages`, `tools`, `add_generation_prompt`) are
    /// ignored.
    pub kwargs: Vec<(String, JsonValue)>,
}

/// Context names a keyword argument cannot replace.
const RESERVED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

/// A compiled chat template and the special-token texts it is rendered with.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    fallback: bool,
}

impl ChatTemplate {
    /// Compiles `source` with Hugging Face's settings; `bos_token`/`eos_token` are the
    /// texts the template sees under those names.
    ///
    /// Errors: [`LlmError::ChatTemplate`] when the template does not compile.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |format: String| strftime_now(&format));
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_owned())
            .map_err(template_error)?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            fallback: false,
        })
    }

    /// Compiles `source` with the BOS and EOS texts of `vocab` (a template given in
    /// place of the model's own).
    ///
    /// Errors: [`LlmError::ChatTemplate`] when the template does not compile.
    pub fn for_vocab(source: &str, vocab: &Vocabulary) -> Result<ChatTemplate> {
        let text = |id: Option<u32>| id.and_then(|id| vocab.token_str(id)).unwrap_or_default();
        ChatTemplate::new(source, text(vocab.bos()), text(vocab.eos()))
    }

    /// The template of a model: `tokenizer.chat_template` from `metadata`, or
    /// [`FALLBACK_TEMPLATE`] when the key is absent; BOS and EOS texts from `vocab`.
    ///
    /// Errors: the key holds something other than a string, or the template does not
    /// compile.
    pub fn from_metadata(metadata: &Metadata, vocab: &Vocabulary) -> Result<ChatTemplate> {
        match metadata.opt_str(CHAT_TEMPLATE_KEY)? {
            Some(source) => ChatTemplate::for_vocab(source, vocab),
            None => {
                let mut template = ChatTemplate::for_vocab(FALLBACK_TEMPLATE, vocab)?;
                template.fallback = true;
                Ok(template)
            }
        }
    }

    /// Whether this is [`FALLBACK_TEMPLATE`] standing in for a missing template.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// The template source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Strings that end an assistant turn beyond the vocabulary's end-of-generation
    /// tokens: the fallback's `<|im_end|>` (which most vocabularies without a template
    /// do not have as a token).
    pub fn stop_strings(&self) -> Vec<String> {
        if self.fallback {
            vec!["<|im_end|>".to_owned()]
        } else {
            Vec::new()
        }
    }

    /// The prompt text for `messages`; with `add_generation_prompt`, ending where the
    /// assistant's reply starts.
    ///
    /// Errors: [`LlmError::ChatTemplate`] when rendering fails (the template's own
    /// `raise_exception`, e.g. for roles it does not accept, or a type error).
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with(messages, &TemplateInputs::default(), add_generation_prompt)
    }

    /// [`ChatTemplate::render`] with tools and keyword arguments (`tojson` writes as
    /// Python's `json.dumps` does, without HTML escaping, as transformers' does).
    ///
    /// Errors: as [`ChatTemplate::render`].
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        inputs: &TemplateInputs,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let values: Vec<JsonValue> = messages.iter().map(ChatMessage::template_value).collect();
        self.render_values(&values, inputs, add_generation_prompt)
    }

    /// Renders messages already in their template form.
    pub(crate) fn render_values(
        &self,
        messages: &[JsonValue],
        inputs: &TemplateInputs,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self.env.get_template(NAME).map_err(template_error)?;
        let mut ctx: Vec<(String, Value)> = vec![
            ("bos_token".into(), Value::from(self.bos_token.as_str())),
            ("eos_token".into(), Value::from(self.eos_token.as_str())),
        ];
        for (k, v) in &inputs.kwargs {
            if !RESERVED.contains(&k.as_str()) {
                ctx.retain(|(name, _)| name != k);
                ctx.push((k.clone(), Value::from_serialize(v)));
            }
        }
        ctx.push(("messages".into(), Value::from_serialize(messages)));
        ctx.push((
            "tools".into(),
            inputs
                .tools
                .as_ref()
                .map_or(Value::from(()), Value::from_serialize),
        ));
        ctx.push(("documents".into(), Value::from(())));
        ctx.push((
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        ));
        template
            .render(Value::from_iter(ctx))
            .map_err(template_error)
    }
}

/// The template function `raise_exception(message)`: fails the render with `message`.
fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// A minijinja error as an [`LlmError::ChatTemplate`] naming the template line.
fn template_error(e: Error) -> LlmError {
    let what = match (e.detail(), e.line()) {
        (Some(detail), Some(line)) => format!("{detail} (line {line})"),
        (Some(detail), None) => detail.to_owned(),
        (None, Some(line)) => format!("{} (line {line})", e.kind()),
        (None, None) => e.kind().to_string(),
    };
    LlmError::ChatTemplate { what }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ChatML template of Qwen 2 / TinyLlama-chat style models (as published in their
    /// `tokenizer_config.json`).
    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// Llama 2 chat's template (from `meta-llama/Llama-2-7b-chat-hf`).
    const LLAMA2: &str = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", " Hi there "),
            ChatMessage::new("assistant", "Hello."),
            ChatMessage::new("user", "Bye"),
        ]
    }

    #[test]
    fn chatml_renders_as_transformers_does() {
        let t = ChatTemplate::new(CHATML, "<s>", "</s>").expect("compile");
        let out = t
            .render(&[ChatMessage::new("user", "Hi")], true)
            .expect("render");
        assert_eq!(
            out,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let out = t.render(&conversation(), false).expect("render");
        assert_eq!(
            out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi there <|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        );
    }

    #[test]
    fn llama2_renders_system_prompt_strip_and_tokens() {
        let t = ChatTemplate::new(LLAMA2, "<s>", "</s>").expect("compile");
        let out = t.render(&conversation(), true).expect("render");
        assert_eq!(
            out,
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi there [/INST] Hello. </s><s>[INST] Bye [/INST]"
        );
    }

    #[test]
    fn raise_exception_and_syntax_errors_are_chat_template_errors() {
        let t = ChatTemplate::new(LLAMA2, "<s>", "</s>").expect("compile");
        let bad = [ChatMessage::new("user", "a"), ChatMessage::new("user", "b")];
        let err = t.render(&bad, true).expect_err("roles");
        assert!(
            matches!(&err, LlmError::ChatTemplate { what } if what.contains("roles must alternate")),
            "{err}"
        );
        let err = ChatTemplate::new("{% for m in messages %}", "", "").expect_err("syntax");
        assert!(matches!(err, LlmError::ChatTemplate { .. }), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn trim_and_lstrip_blocks_as_in_hugging_face() {
        let src = "{% for m in messages %}\n    {{ m.content }}\n{% endfor %}";
        let t = ChatTemplate::new(src, "", "").expect("compile");
        let out = t
            .render(
                &[ChatMessage::new("user", "a"), ChatMessage::new("user", "b")],
                false,
            )
            .expect("render");
        assert_eq!(out, "    a\n    b\n");
    }

    #[test]
    fn metadata_template_or_fallback() {
        use crate::testing::SyntheticVocab;
        let mut md = Metadata::new();
        SyntheticVocab::new(300)
            .expect("vocab")
            .write_metadata(&mut md);
        let vocab = Vocabulary::from_gguf(&md).expect("vocab");
        let t = ChatTemplate::from_metadata(&md, &vocab).expect("fallback");
        assert!(t.is_fallback());
        assert_eq!(t.stop_strings(), vec!["<|im_end|>".to_owned()]);
        assert_eq!(
            t.render(&[ChatMessage::new("user", "Hi")], true)
                .expect("render"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        md.set(
            CHAT_TEMPLATE_KEY,
            "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
        );
        let t = ChatTemplate::from_metadata(&md, &vocab).expect("template");
        assert!(!t.is_fallback());
        assert!(t.stop_strings().is_empty());
        assert_eq!(
            t.render(&[ChatMessage::new("user", "x")], false)
                .expect("render"),
            "<s>x</s>"
        );
        md.set(CHAT_TEMPLATE_KEY, 7u32);
        assert!(ChatTemplate::from_metadata(&md, &vocab).is_err());
    }

    #[test]
    fn fallback_renders_tools_calls_and_results() {
        use crate::chat::message::ToolCall;
        let t = ChatTemplate::new(FALLBACK_TEMPLATE, "", "").expect("compile");
        let tool = JsonValue::parse(
            r#"{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}"#,
        )
        .expect("json");
        let messages = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi"),
            ChatMessage::new("assistant", "").with_tool_calls(vec![ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: JsonValue::parse(r#"{"a": 1}"#).expect("json"),
            }]),
            ChatMessage::new("tool", "42").with_tool_call_id("c"),
        ];
        let inputs = TemplateInputs {
            tools: Some(vec![tool]),
            kwargs: Vec::new(),
        };
        let out = t.render_with(&messages, &inputs, true).expect("render");
        assert!(
            out.starts_with("<|im_start|>system\nBe brief.\n\n# Tools\n"),
            "{out}"
        );
        assert!(out.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}\n</tools>"), "{out}");
        assert!(out.ends_with(
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        ), "{out}");
        // Without tools: plain ChatML, as before.
        let out = t.render(&messages[..2], false).expect("render");
        assert_eq!(
            out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        );
    }
}
