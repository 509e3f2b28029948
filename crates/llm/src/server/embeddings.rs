//! `POST /v1/embeddings`: each input's pooled, L2-normalised hidden states, computed on
//! the engine thread as jobs of their own (a request's inputs run as slots free up).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::unbounded_channel;

use crate::engine::SamplerConfig;
use crate::server::admission::{ChoiceSender, Job, JobEvent};
use crate::server::api_keys::Caller;
use crate::server::errors::ApiError;
use crate::server::routes::{answer, enqueue, parse_body};
use crate::server::state::AppState;
use crate::tokenizer::TokenizeOptions;

/// `input`: a text, several, token ids, or several lists of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum EmbeddingInput {
    /// One text.
    Text(String),
    /// Several texts.
    Texts(Vec<String>),
    /// One sequence of token ids.
    Tokens(Vec<u32>),
    /// Several sequences of token ids.
    TokenLists(Vec<Vec<u32>>),
}

/// The body of `POST /v1/embeddings` (unknown fields are ignored).
#[derive(Debug, Deserialize)]
struct EmbeddingsRequest {
    /// What to embed.
    input: EmbeddingInput,
    /// `float` (the default) or `base64` (little-endian f32 bytes, as the `openai`
    /// client asks for).
    #[serde(default)]
    encoding_format: Option<String>,
    /// The vector length wanted: only the model's own.
    #[serde(default)]
    dimensions: Option<i64>,
}

/// `POST /v1/embeddings`.
pub(crate) async fn embeddings(
    State(app): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    app.metrics
        .embedding_requests
        .fetch_add(1, Ordering::Relaxed);
    let result = embed(&app, caller, body).await;
    answer(&app, result)
}

async fn embed(
    app: &AppState,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: EmbeddingsRequest = parse_body(app, body)?;
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                Some("encoding_format"),
                format!("`encoding_format` is `float` or `base64` (got {other:?})"),
            ));
        }
    };
    let dim = app.model.config().embedding_length;
    if let Some(d) = request.dimensions
        && d != dim as i64
    {
        return Err(ApiError::invalid(
            Some("dimensions"),
            format!("this model's embeddings have {dim} dimensions (got {d})"),
        ));
    }
    let inputs = input_tokens(app, request.input)?;
    let (events, mut receiver) = unbounded_channel();
    let groups: Vec<Vec<Job>> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, prompt)| {
            vec![Job {
                prompt,
                sampler: SamplerConfig::greedy(),
                max_tokens: 0,
                stop: Vec::new(),
                ignore_eos: false,
                logprobs: None,
                prompt_logprobs: false,
                embed: Some(app.pooling),
                constraint: None,
                trie: Arc::clone(&app.trie),
                events: ChoiceSender::new(i, events.clone()),
            }]
        })
        .collect();
    drop(events);
    let count = groups.len();
    let hold = enqueue(app, caller, groups)?;
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; count];
    let (mut done, mut tokens) = (0, 0);
    while done < count {
        match receiver.recv().await {
            Some((i, JobEvent::Embedding(v))) => {
                if let Some(slot) = vectors.get_mut(i) {
                    *slot = Some(v);
                }
            }
            Some((_, JobEvent::Done { prompt_tokens, .. })) => {
                done += 1;
                tokens += prompt_tokens;
            }
            Some((_, JobEvent::Failed(message))) => {
                return Err(ApiError::server(StatusCode::INTERNAL_SERVER_ERROR, message));
            }
            Some((_, JobEvent::Invalid(message))) => {
                return Err(ApiError::invalid(Some("input"), message));
            }
            Some(_) => {}
            None => {
                return Err(ApiError::shutting_down());
            }
        }
    }
    drop(hold);
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let v = v.unwrap_or_default();
            let embedding = if base64 {
                Value::String(base64_f32(&v))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": app.model_id,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response())
}

/// Each input's tokens (texts with the model's BOS/EOS or CLS/SEP, their control-token
/// text kept as text), or a 400 naming the input at fault: empty, over the context, ids
/// outside the vocabulary, more inputs than the slots and queue hold.
fn input_tokens(app: &AppState, input: EmbeddingInput) -> Result<Vec<Vec<u32>>, ApiError> {
    let vocab = app.model.vocab();
    let text = |t: &str| {
        vocab.tokenize(
            t,
            TokenizeOptions {
                add_special: true,
                parse_special: false,
            },
        )
    };
    let empty_text = match &input {
        EmbeddingInput::Text(t) => t.is_empty().then(|| "input".to_owned()),
        EmbeddingInput::Texts(ts) => ts
            .iter()
            .position(String::is_empty)
            .map(|i| format!("input[{i}]")),
        _ => None,
    };
    if let Some(param) = empty_text {
        return Err(ApiError::invalid(
            Some(&param),
            "the input is an empty string",
        ));
    }
    let (lists, single) = match input {
        EmbeddingInput::Text(t) => (vec![text(&t)], true),
        EmbeddingInput::Texts(ts) => (ts.iter().map(|t| text(t)).collect(), false),
        EmbeddingInput::Tokens(ids) => (vec![ids], true),
        EmbeddingInput::TokenLists(lists) => (lists, false),
    };
    if lists.is_empty() {
        return Err(ApiError::invalid(
            Some("input"),
            "`input` must hold at least one item",
        ));
    }
    if lists.len() > app.admission.capacity() {
        return Err(ApiError::invalid(
            Some("input"),
            format!(
                "{} inputs are more than the server's slots and queue hold ({})",
                lists.len(),
                app.admission.capacity()
            ),
        ));
    }
    let context = app.model.context_length();
    for (i, ids) in lists.iter().enumerate() {
        let param = if single {
            "input".to_owned()
        } else {
            format!("input[{i}]")
        };
        if ids.is_empty() {
            return Err(ApiError::invalid(
                Some(&param),
                "the input is empty (it tokenized to nothing)",
            ));
        }
        if ids.len() > context {
            return Err(ApiError::invalid(
                Some(&param),
                format!(
                    "the input is {} tokens, but the context holds {context}",
                    ids.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab.len()) {
            return Err(ApiError::invalid(
                Some(&param),
                format!(
                    "token id {bad} is out of range (vocabulary of {} tokens)",
                    vocab.len()
                ),
            ));
        }
    }
    Ok(lists)
}

/// `values` as little-endian f32 bytes in standard base64 (with padding).
fn base64_f32(values: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64_f32;

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        // 1.0f32 is 00 00 80 3f.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[]), "");
        assert_eq!(base64_f32(&[1.0, -2.0, 0.5]), "AACAPwAAAMAAAAA/");
    }
}
