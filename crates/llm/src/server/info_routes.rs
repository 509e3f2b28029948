//! llama-server's utility endpoints: `POST /tokenize`, `POST /detokenize`,
//! `POST /apply-template`, `GET /props` and `GET /slots`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::SamplerConfig;
use crate::server::errors::ApiError;
use crate::server::openai::GenerationRequest;
use crate::server::routes::{parse_body, render_chat};
use crate::server::state::AppState;
use crate::tokenizer::{DetokenizeOptions, TokenizeOptions, Vocabulary};

/// The body of `POST /tokenize`.
#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    /// The text.
    content: String,
    /// Add the BOS/EOS tokens the model asks for (default false).
    #[serde(default)]
    add_special: bool,
    /// Read control-token text as those tokens (default true).
    #[serde(default = "yes")]
    parse_special: bool,
    /// List `{"id", "piece"}` pairs instead of ids.
    #[serde(default)]
    with_pieces: bool,
}

fn yes() -> bool {
    true
}

/// The body of `POST /detokenize`.
#[derive(Debug, Deserialize)]
struct DetokenizeRequest {
    /// Token ids.
    tokens: Vec<u32>,
}

/// Token `id`'s piece: its text, or its bytes when they are not UTF-8 on their own.
fn piece(vocab: &Vocabulary, id: u32) -> Value {
    let bytes = vocab.token_piece(id, true).unwrap_or_default();
    match String::from_utf8(bytes) {
        Ok(text) => text.into(),
        Err(e) => e.into_bytes().into(),
    }
}

/// `POST /tokenize`: `{"tokens": [ids]}`, or `[{"id", "piece"}]` with `with_pieces`.
pub(crate) async fn tokenize(
    State(app): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request: TokenizeRequest = match parse_body(&app, body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let vocab = app.model.vocab();
    let ids = vocab.tokenize(
        &request.content,
        TokenizeOptions {
            add_special: request.add_special,
            parse_special: request.parse_special,
        },
    );
    let tokens: Vec<Value> = if request.with_pieces {
        ids.iter()
            .map(|&id| json!({"id": id, "piece": piece(vocab, id)}))
            .collect()
    } else {
        ids.iter().map(|&id| id.into()).collect()
    };
    Json(json!({ "tokens": tokens })).into_response()
}

/// `POST /detokenize`: `{"content": text}` (control tokens by name).
pub(crate) async fn detokenize(
    State(app): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request: DetokenizeRequest = match parse_body(&app, body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let vocab = app.model.vocab();
    if let Some((i, bad)) = request
        .tokens
        .iter()
        .enumerate()
        .find(|&(_, &id)| id as usize >= vocab.len())
    {
        return ApiError::invalid(
            Some(&format!("tokens[{i}]")),
            format!(
                "token id {bad} is out of range (vocabulary of {} tokens)",
                vocab.len()
            ),
        )
        .into_response();
    }
    let options = DetokenizeOptions {
        render_special: true,
        strip_leading_space: false,
    };
    match vocab.detokenize(&request.tokens, options) {
        Ok(content) => Json(json!({ "content": content })).into_response(),
        Err(e) => ApiError::invalid(Some("tokens"), e.to_string()).into_response(),
    }
}

/// `POST /apply-template`: a chat request's prompt as the model's template renders it
/// (`{"prompt": text}`), tools and template keyword arguments included.
pub(crate) async fn apply_template(
    State(app): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let rendered =
        parse_body::<GenerationRequest>(&app, body).and_then(|request| render_chat(&app, &request));
    match rendered {
        Ok((prompt, _, _)) => Json(json!({ "prompt": prompt.text() })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /props`: the server's settings (slots, context, the sampling defaults, the chat
/// template and the model's special tokens).
pub(crate) async fn props(State(app): State<Arc<AppState>>) -> Response {
    let d = SamplerConfig::default();
    let vocab = app.model.vocab();
    let special = |id: Option<u32>| -> Value { id.map_or(Value::Null, |id| piece(vocab, id)) };
    Json(json!({
        "model": app.model_id,
        "total_slots": app.slots,
        "n_ctx": app.model.context_length(),
        "n_vocab": app.model.config().vocab_size,
        "default_generation_settings": {
            "n_ctx": app.model.context_length(),
            "params": {
                "temperature": d.temperature,
                "top_k": d.top_k,
                "top_p": d.top_p,
                "min_p": d.min_p,
                "repeat_penalty": d.repetition_penalty,
                "repeat_last_n": d.repetition_window,
                "frequency_penalty": d.frequency_penalty,
                "presence_penalty": d.presence_penalty,
            },
        },
        "chat_template": app.template.source(),
        "bos_token": special(vocab.bos()),
        "eos_token": special(vocab.eos()),
        "build_info": format!("tempra {}", env!("CARGO_PKG_VERSION")),
    }))
    .into_response()
}

/// `GET /slots`: each slot's id, context, whether it runs a request, the tokens its
/// cache holds and the running request's prompt and generated counts (no text).
pub(crate) async fn slots(State(app): State<Arc<AppState>>) -> Response {
    Json(app.board.to_json(app.model.context_length())).into_response()
}
