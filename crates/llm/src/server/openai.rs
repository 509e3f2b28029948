//! The OpenAI request and response bodies the server reads and writes, and the checks
//! that turn a request's sampling fields into engine settings.

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;
use crate::engine::{FinishReason, SamplerConfig};
use crate::server::errors::ApiError;

/// The most stop strings a request may give.
pub(crate) const MAX_STOP_STRINGS: usize = 16;

/// `prompt`: a string, a list holding one string, or token ids.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Prompt {
    /// Text.
    Text(String),
    /// Several texts (only one is accepted: n = 1).
    Texts(Vec<String>),
    /// Token ids.
    Tokens(Vec<u32>),
}

/// `stop`: one string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Stop {
    /// One string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// A message's `content`: text, or a list of parts of which the text ones are used.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    /// Text.
    Text(String),
    /// Content parts (`{"type": "text", "text": ...}`).
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Deserialize)]
pub(crate) struct ContentPart {
    /// `text` (other types are refused).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// One message of a chat request.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageIn {
    /// `system`, `user`, `assistant`, ...
    pub(crate) role: String,
    /// The content (`null` is an empty message).
    #[serde(default)]
    pub(crate) content: Option<Content>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    /// Send a last chunk with the token usage.
    #[serde(default)]
    pub(crate) include_usage: bool,
}

/// The body of `POST /v1/completions` and `POST /v1/chat/completions` (unknown fields are
/// ignored, as clients send many).
#[derive(Debug, Deserialize)]
pub(crate) struct GenerationRequest {
    /// The model asked for: any name is served by the loaded model, so it is only read
    /// to refuse a value that is not a string.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) model: Option<String>,
    /// Completions: the prompt.
    #[serde(default)]
    pub(crate) prompt: Option<Prompt>,
    /// Chat: the conversation.
    #[serde(default)]
    pub(crate) messages: Option<Vec<MessageIn>>,
    /// The most tokens to generate.
    #[serde(default)]
    pub(crate) max_tokens: Option<i64>,
    /// The newer name of `max_tokens` in chat requests.
    #[serde(default)]
    pub(crate) max_completion_tokens: Option<i64>,
    /// Temperature (0: greedy).
    #[serde(default)]
    pub(crate) temperature: Option<f32>,
    /// Nucleus sampling threshold.
    #[serde(default)]
    pub(crate) top_p: Option<f32>,
    /// Keep the K most likely tokens (0: all).
    #[serde(default)]
    pub(crate) top_k: Option<i64>,
    /// Drop tokens below this fraction of the best one's probability.
    #[serde(default)]
    pub(crate) min_p: Option<f32>,
    /// Random seed.
    #[serde(default)]
    pub(crate) seed: Option<u64>,
    /// Stop strings.
    #[serde(default)]
    pub(crate) stop: Option<Stop>,
    /// Repetition penalty (llama.cpp's; 1: off).
    #[serde(default, alias = "repeat_penalty")]
    pub(crate) repetition_penalty: Option<f32>,
    /// OpenAI's frequency penalty.
    #[serde(default)]
    pub(crate) frequency_penalty: Option<f32>,
    /// OpenAI's presence penalty.
    #[serde(default)]
    pub(crate) presence_penalty: Option<f32>,
    /// Completions wanted: only 1.
    #[serde(default)]
    pub(crate) n: Option<i64>,
    /// Server-sent events.
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub(crate) stream_options: Option<StreamOptions>,
    /// Keep generating past end-of-generation tokens (llama.cpp's extension).
    #[serde(default)]
    pub(crate) ignore_eos: Option<bool>,
}

/// A request's generation settings, checked.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Sampling.
    pub(crate) sampler: SamplerConfig,
    /// The most tokens (`None`: until the context is full).
    pub(crate) max_tokens: Option<usize>,
    /// Stop strings.
    pub(crate) stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub(crate) ignore_eos: bool,
    /// Stream.
    pub(crate) stream: bool,
    /// Send a usage chunk at the end of a stream.
    pub(crate) include_usage: bool,
}

fn check(ok: bool, param: &str, message: impl FnOnce() -> String) -> Result<(), ApiError> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(Some(param), message()))
    }
}

impl GenerationRequest {
    /// The generation settings, or a 400 naming the field at fault.
    pub(crate) fn plan(&self) -> Result<Plan, ApiError> {
        let n = self.n.unwrap_or(1);
        check(n == 1, "n", || format!("n must be 1 (got {n})"))?;
        let max_tokens = match self.max_tokens.or(self.max_completion_tokens) {
            Some(m) => {
                check(m > 0, "max_tokens", || {
                    format!("max_tokens must be at least 1 (got {m})")
                })?;
                Some(usize::try_from(m).unwrap_or(usize::MAX))
            }
            None => None,
        };
        let defaults = SamplerConfig::default();
        let temperature = self.temperature.unwrap_or(defaults.temperature);
        check(
            temperature.is_finite() && (0.0..=2.0).contains(&temperature),
            "temperature",
            || format!("temperature must be between 0 and 2 (got {temperature})"),
        )?;
        let top_p = self.top_p.unwrap_or(defaults.top_p);
        check(top_p > 0.0 && top_p <= 1.0, "top_p", || {
            format!("top_p must be in (0, 1] (got {top_p})")
        })?;
        let top_k = self.top_k.unwrap_or(defaults.top_k as i64);
        check(top_k >= 0, "top_k", || {
            format!("top_k must be 0 (off) or more (got {top_k})")
        })?;
        let min_p = self.min_p.unwrap_or(defaults.min_p);
        check((0.0..=1.0).contains(&min_p), "min_p", || {
            format!("min_p must be in [0, 1] (got {min_p})")
        })?;
        let repetition_penalty = self
            .repetition_penalty
            .unwrap_or(defaults.repetition_penalty);
        check(
            repetition_penalty.is_finite() && repetition_penalty > 0.0,
            "repetition_penalty",
            || format!("repetition_penalty must be positive (got {repetition_penalty})"),
        )?;
        let frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        check(
            (-2.0..=2.0).contains(&frequency_penalty),
            "frequency_penalty",
            || format!("frequency_penalty must be between -2 and 2 (got {frequency_penalty})"),
        )?;
        let presence_penalty = self.presence_penalty.unwrap_or(0.0);
        check(
            (-2.0..=2.0).contains(&presence_penalty),
            "presence_penalty",
            || format!("presence_penalty must be between -2 and 2 (got {presence_penalty})"),
        )?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        check(stop.len() <= MAX_STOP_STRINGS, "stop", || {
            format!(
                "at most {MAX_STOP_STRINGS} stop strings (got {})",
                stop.len()
            )
        })?;
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        Ok(Plan {
            sampler: SamplerConfig {
                temperature,
                top_k: usize::try_from(top_k).unwrap_or(usize::MAX),
                top_p,
                min_p,
                repetition_penalty,
                frequency_penalty,
                presence_penalty,
                seed,
                ..defaults
            },
            max_tokens,
            stop,
            ignore_eos: self.ignore_eos.unwrap_or(false),
            stream: self.stream.unwrap_or(false),
            include_usage: self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
        })
    }

    /// The chat messages, or a 400.
    pub(crate) fn chat_messages(&self) -> Result<Vec<ChatMessage>, ApiError> {
        let Some(messages) = &self.messages else {
            return Err(ApiError::invalid(
                Some("messages"),
                "`messages` is required",
            ));
        };
        check(!messages.is_empty(), "messages", || {
            "`messages` must hold at least one message".into()
        })?;
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let content = match &m.content {
                    None => String::new(),
                    Some(Content::Text(t)) => t.clone(),
                    Some(Content::Parts(parts)) => {
                        let mut text = String::new();
                        for part in parts {
                            match (&*part.kind, &part.text) {
                                ("text", Some(t)) => text.push_str(t),
                                (kind, _) => {
                                    return Err(ApiError::invalid(
                                        Some(&format!("messages[{i}].content")),
                                        format!("content parts of type `{kind}` are not supported (text only)"),
                                    ));
                                }
                            }
                        }
                        text
                    }
                };
                Ok(ChatMessage::new(m.role.clone(), content))
            })
            .collect()
    }
}

/// OpenAI's `finish_reason` for an engine finish.
pub(crate) fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length | FinishReason::ContextFull => "length",
        _ => "stop",
    }
}

/// `usage`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    /// Prompt tokens.
    pub(crate) prompt_tokens: usize,
    /// Generated tokens.
    pub(crate) completion_tokens: usize,
    /// Both.
    pub(crate) total_tokens: usize,
    /// Prompt tokens served from the slot's cache.
    pub(crate) prompt_tokens_details: CachedTokens,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CachedTokens {
    /// Prompt tokens reused from the prompt cache.
    pub(crate) cached_tokens: usize,
}

impl Usage {
    /// Usage of a finished job.
    pub(crate) fn new(
        prompt_tokens: usize,
        cached_tokens: usize,
        completion_tokens: usize,
    ) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: CachedTokens { cached_tokens },
        }
    }
}

/// Which endpoint a response is for (they differ in object names and field layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// What identifies a response: endpoint, id, creation time and model.
#[derive(Debug, Clone)]
pub(crate) struct ResponseHead {
    /// The endpoint.
    pub(crate) endpoint: Endpoint,
    /// `cmpl-N` / `chatcmpl-N`.
    pub(crate) id: String,
    /// Unix time.
    pub(crate) created: u64,
    /// The model id.
    pub(crate) model: String,
}

impl ResponseHead {
    /// A streamed chunk carrying `text` (chat: as `delta.content`, plus the role on the
    /// first chunk) and the finish reason on the last.
    pub(crate) fn chunk(
        &self,
        text: Option<&str>,
        role: bool,
        finish: Option<&str>,
    ) -> serde_json::Value {
        let choice = match self.endpoint {
            Endpoint::Completions => serde_json::json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": null,
                "finish_reason": finish,
            }),
            Endpoint::Chat => {
                let mut delta = serde_json::Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(text) = text {
                    delta.insert("content".into(), text.into());
                }
                serde_json::json!({
                    "index": 0,
                    "delta": delta,
                    "logprobs": null,
                    "finish_reason": finish,
                })
            }
        };
        serde_json::json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }

    /// The last chunk of a stream with `stream_options.include_usage`: no choices, the
    /// usage.
    pub(crate) fn usage_chunk(&self, usage: Usage) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        })
    }

    /// The whole (non-streamed) response.
    pub(crate) fn full(&self, text: &str, finish: &str, usage: Usage) -> serde_json::Value {
        let choice = match self.endpoint {
            Endpoint::Completions => serde_json::json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish,
            }),
            Endpoint::Chat => serde_json::json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": finish,
            }),
        };
        serde_json::json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
        })
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }
}
