//! `ChatTemplate`: a model's Jinja chat template, compiled once and rendered per request.

use minijinja::{Environment, Error, ErrorKind, Value, context};

use crate::chat::message::ChatMessage;
use crate::chat::strftime::strftime_now;
use crate::error::{LlmError, Result};
use crate::gguf::Metadata;
use crate::tokenizer::Vocabulary;

/// The GGUF metadata key holding the model's chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The template used when a model has none: ChatML, as llama.cpp falls back to.
pub const FALLBACK_TEMPLATE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The name the template is stored under in its environment.
const NAME: &str = "chat";

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

    /// The template of a model: `tokenizer.chat_template` from `metadata`, or
    /// [`FALLBACK_TEMPLATE`] when the key is absent; BOS and EOS texts from `vocab`.
    ///
    /// Errors: the key holds something other than a string, or the template does not
    /// compile.
    pub fn from_metadata(metadata: &Metadata, vocab: &Vocabulary) -> Result<ChatTemplate> {
        let text = |id: Option<u32>| {
            id.and_then(|id| vocab.token_str(id))
                .unwrap_or_default()
                .to_owned()
        };
        let (bos, eos) = (text(vocab.bos()), text(vocab.eos()));
        match metadata.opt_str(CHAT_TEMPLATE_KEY)? {
            Some(source) => ChatTemplate::new(source, &bos, &eos),
            None => {
                let mut template = ChatTemplate::new(FALLBACK_TEMPLATE, &bos, &eos)?;
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
        let template = self.env.get_template(NAME).map_err(template_error)?;
        template
            .render(context! {
                messages => Value::from_serialize(messages),
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token.as_str(),
                eos_token => self.eos_token.as_str(),
            })
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
}
