//! The HTTP routes: `POST /v1/completions`, `POST /v1/chat/completions`,
//! `GET /v1/models`, `GET /health` and `GET /metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use tokio::sync::mpsc::unbounded_channel;

use crate::chat::{RenderedPrompt, TemplateInputs};
use crate::server::admission::{ChoiceSender, Group, Job, QueuePlace, Rejected};
use crate::server::api_keys::{Caller, KeyPermit};
use crate::server::choices::{Choices, ChoicesPlan, Echo};
use crate::server::embeddings::embeddings;
use crate::server::errors::ApiError;
use crate::server::info_routes::{apply_template, detokenize, props, slots, tokenize};
use crate::server::openai::{Endpoint, GenerationRequest, Plan, Prompt, ResponseHead};
use crate::server::readiness::health_response;
use crate::server::sse::stream_response;
use crate::server::state::AppState;
use crate::server::structured::{
    ChatContext, OutputPlan, RequestTools, ToolChoice, output_plan, request_tools, template_kwargs,
};
use crate::tokenizer::TokenizeOptions;

/// A request ready to queue: its prompt tokens, settings, the template's stop strings
/// and what its output is held to.
struct Ready {
    /// One or more prompts (completions may give several).
    prompts: Vec<Vec<u32>>,
    plan: Plan,
    stops: Vec<String>,
    output: OutputPlan,
    /// Completions with `echo`: each prompt's text, put before its outputs.
    echo: Option<Vec<String>>,
}

/// A prepared request, or why not.
type Prepared = Result<Ready, ApiError>;

/// The router over `state`.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let limit = state.max_body_bytes;
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/embeddings", post(embeddings))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/apply-template", post(apply_template))
        .route("/props", get(props))
        .route("/slots", get(slots))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn not_found() -> Response {
    ApiError::invalid(None, "no such endpoint")
        .with_status(StatusCode::NOT_FOUND)
        .with_code("not_found")
        .into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::invalid(None, "method not allowed on this endpoint")
        .with_status(StatusCode::METHOD_NOT_ALLOWED)
        .into_response()
}

async fn models(State(app): State<Arc<AppState>>) -> Response {
    Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": app.model_id,
            "object": "model",
            "created": app.created,
            "owned_by": "tempra",
            "meta": {
                "context_length": app.model.context_length(),
                "vocab_size": app.model.config().vocab_size,
            },
        }],
    }))
    .into_response()
}

async fn health(State(app): State<Arc<AppState>>) -> Response {
    health_response(&app.admission)
}

async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let pool = app.model.autograd().ctx().pool_stats();
    let text = app.metrics.render(
        app.slots,
        app.admission.occupancy(),
        &app.connections,
        &pool,
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn completions(
    State(app): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    app.metrics
        .completion_requests
        .fetch_add(1, Ordering::Relaxed);
    let prepared = parse(&app, body).and_then(|request| {
        let plan = request.plan(Endpoint::Completions, app.model.config().vocab_size)?;
        let (prompts, texts) = completion_prompts(&app, &request)?;
        let echo = plan.echo.then_some(texts);
        if request.tools.is_some() {
            return Err(ApiError::invalid(
                Some("tools"),
                "`tools` are for /v1/chat/completions",
            ));
        }
        let output = output_plan(&request, None, None)?;
        Ok(Ready {
            prompts,
            plan,
            stops: Vec::new(),
            output,
            echo,
        })
    });
    respond(app, caller, Endpoint::Completions, prepared).await
}

async fn chat_completions(
    State(app): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    app.metrics.chat_requests.fetch_add(1, Ordering::Relaxed);
    let prepared = parse(&app, body).and_then(|request| {
        let plan = request.plan(Endpoint::Chat, app.model.config().vocab_size)?;
        let (rendered, tools, inputs) = render_chat(&app, &request)?;
        let context = ChatContext {
            tool_format: app.tool_format,
            reasoning: app.reasoning,
            prompt: rendered.text(),
            kwargs: &inputs.kwargs,
        };
        let output = output_plan(&request, tools.as_ref(), Some(&context))?;
        // A grammar's end is the reply's end: the fallback's stop string could cut
        // JSON text.
        let stops = if output.is_constrained() {
            Vec::new()
        } else {
            app.template.stop_strings()
        };
        Ok(Ready {
            prompts: vec![rendered.tokenize(app.model.vocab())],
            plan,
            stops,
            output,
            echo: None,
        })
    });
    respond(app, caller, Endpoint::Chat, prepared).await
}

/// A chat request's prompt as the template renders it (with the request's tools unless
/// `tool_choice` is `none`, and its template keyword arguments), its tools and the
/// template inputs; or a 400 naming the field at fault.
pub(crate) fn render_chat(
    app: &AppState,
    request: &GenerationRequest,
) -> Result<(RenderedPrompt, Option<RequestTools>, TemplateInputs), ApiError> {
    let messages = request.chat_messages(&app.roles)?;
    let tools = request_tools(request)?;
    let kwargs = template_kwargs(request)?;
    let inputs = TemplateInputs {
        // With tool_choice "none" the model is not told about the tools.
        tools: tools
            .as_ref()
            .filter(|t| t.choice != ToolChoice::None)
            .map(|t| t.definitions.clone()),
        kwargs,
    };
    // Message text stays text: control-token text inside it is not parsed.
    let rendered = app
        .template
        .render_prompt_with(&messages, &inputs, true, app.model.vocab())
        .map_err(|e| ApiError::invalid(Some("messages"), e.to_string()))?;
    Ok((rendered, tools, inputs))
}

/// The request body as JSON, or a 4xx naming what was wrong.
fn parse(
    app: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<GenerationRequest, ApiError> {
    parse_body(app, body)
}

/// The request body as JSON of type `T`, or a 4xx naming what was wrong (the field's
/// path for a value of the wrong type).
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    app: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(app.max_body_bytes).closing()
        } else {
            ApiError::invalid(None, rejection.body_text()).with_status(rejection.status())
        }
    })?;
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let request: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::invalid(None, format!("malformed JSON: {inner}"))
        } else if path == "." {
            ApiError::invalid(None, format!("bad request body: {inner}"))
        } else {
            ApiError::invalid(Some(&path), format!("`{path}`: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::invalid(None, format!("malformed JSON: {e}")))?;
    Ok(request)
}

/// The token ids of a completions request's prompts and the text each shows when echoed
/// (as given, or the ids' text). Special-token text in a raw prompt is parsed
/// (`<|im_start|>` becomes that token): the caller writes the whole prompt, unlike chat
/// messages.
fn completion_prompts(
    app: &AppState,
    request: &GenerationRequest,
) -> Result<(Vec<Vec<u32>>, Vec<String>), ApiError> {
    let vocab = app.model.vocab();
    let from_text = |text: &str| {
        vocab.tokenize(
            text,
            TokenizeOptions {
                add_special: true,
                parse_special: true,
            },
        )
    };
    let from_ids = |param: String, ids: &[u32]| {
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab.len()) {
            return Err(ApiError::invalid(
                Some(&param),
                format!(
                    "token id {bad} is out of range (vocabulary of {} tokens)",
                    vocab.len()
                ),
            ));
        }
        let text = vocab
            .detokenize(ids, Default::default())
            .unwrap_or_default();
        Ok((ids.to_vec(), text))
    };
    let pairs: Vec<(Vec<u32>, String)> = match &request.prompt {
        None => return Err(ApiError::invalid(Some("prompt"), "`prompt` is required")),
        Some(Prompt::Text(text)) => vec![(from_text(text), text.clone())],
        Some(Prompt::Texts(texts)) => texts.iter().map(|t| (from_text(t), t.clone())).collect(),
        Some(Prompt::Tokens(ids)) => vec![from_ids("prompt".into(), ids)?],
        Some(Prompt::TokenLists(lists)) => lists
            .iter()
            .enumerate()
            .map(|(i, ids)| from_ids(format!("prompt[{i}]"), ids))
            .collect::<Result<_, _>>()?,
    };
    if pairs.is_empty() {
        return Err(ApiError::invalid(
            Some("prompt"),
            "`prompt` must hold at least one prompt",
        ));
    }
    Ok(pairs.into_iter().unzip())
}

/// Queues the job and answers: a stream, the whole response, or an error.
async fn respond(
    app: Arc<AppState>,
    caller: Caller,
    endpoint: Endpoint,
    prepared: Prepared,
) -> Response {
    let result = generate(&app, caller, endpoint, prepared).await;
    answer(&app, result)
}

/// A handler's response, or its refusal counted (429 as rejected, another 4xx as
/// invalid; engine failures are counted by the engine thread).
pub(crate) fn answer(app: &AppState, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(response) => response,
        Err(e) => {
            if e.status == StatusCode::TOO_MANY_REQUESTS {
                app.metrics
                    .rejected_requests
                    .fetch_add(1, Ordering::Relaxed);
            } else if e.status.is_client_error() {
                app.metrics.invalid_requests.fetch_add(1, Ordering::Relaxed);
            }
            e.into_response()
        }
    }
}

/// Queues `groups` for `caller`, or the refusal: the key's share and the queue place
/// are held until the response ends or the client leaves (dropping the place takes the
/// jobs that still wait out of the queue, dropping the permit frees the key's share).
pub(crate) fn enqueue(
    app: &AppState,
    caller: Caller,
    groups: Vec<Group>,
) -> Result<(QueuePlace, Option<KeyPermit>), ApiError> {
    let permit = app.key_limits.acquire(caller)?;
    let place = app.admission.submit(groups).map_err(|rejected| match rejected {
        Rejected::Full { slots, queue } => ApiError::rate_limited(format!(
            "the server is busy: all {slots} slots are busy and the queue of {queue} is full; retry later"
        )),
        Rejected::Closed => ApiError::shutting_down(),
    })?;
    Ok((place, permit))
}

async fn generate(
    app: &AppState,
    caller: Caller,
    endpoint: Endpoint,
    prepared: Prepared,
) -> Result<Response, ApiError> {
    let Ready {
        prompts,
        plan,
        stops: extra_stops,
        output,
        echo,
    } = prepared?;
    if app.model.config().arch.description().encoder {
        return Err(ApiError::invalid(
            None,
            format!(
                "this model ({}) is an encoder: it makes embeddings (/v1/embeddings), not text",
                app.model.config().arch
            ),
        ));
    }
    let context = app.model.context_length();
    let field = |i: usize| match endpoint {
        Endpoint::Chat => "messages".to_owned(),
        Endpoint::Completions if prompts.len() > 1 => format!("prompt[{i}]"),
        Endpoint::Completions => "prompt".to_owned(),
    };
    // Scoring a prompt (`max_tokens: 0` with `echo`) generates nothing: it may fill
    // the context.
    let score_only = plan.max_tokens == Some(0);
    for (i, prompt) in prompts.iter().enumerate() {
        if prompt.is_empty() {
            return Err(ApiError::invalid(
                Some(&field(i)),
                "the prompt is empty (it tokenized to nothing)",
            ));
        }
        if prompt.len() > context || (prompt.len() == context && !score_only) {
            return Err(ApiError::invalid(
                Some(&field(i)),
                format!(
                    "the prompt is {} tokens, but the context holds {context} (and at least one token must be generated)",
                    prompt.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
    }
    // A prompt's continuations run at once, one slot each.
    let n = plan.n;
    if n > app.slots {
        return Err(ApiError::invalid(
            Some("n"),
            format!(
                "n is {n}, but the server has {} slots (each continuation of a prompt takes one)",
                app.slots
            ),
        ));
    }
    let choices = prompts.len().saturating_mul(n);
    if choices > app.admission.capacity() {
        return Err(ApiError::invalid(
            Some(if prompts.len() > 1 { "prompt" } else { "n" }),
            format!(
                "{} prompts with n = {n} make {choices} choices, more than the server's slots and queue hold ({})",
                prompts.len(),
                app.admission.capacity()
            ),
        ));
    }
    let mut stop = plan.stop;
    stop.extend(extra_stops);
    let echoes: Vec<Option<Echo>> = match echo {
        Some(texts) => texts
            .into_iter()
            .zip(&prompts)
            .map(|(text, prompt)| {
                Some(Echo {
                    text,
                    prompt: prompt.clone(),
                })
            })
            .collect(),
        None => vec![None; prompts.len()],
    };
    let (events, mut receiver) = unbounded_channel();
    let mut groups = Vec::with_capacity(prompts.len());
    for (p, prompt) in prompts.into_iter().enumerate() {
        let room = context - prompt.len();
        let max_tokens = plan.max_tokens.unwrap_or(room).min(room);
        let mut group = Vec::with_capacity(n);
        for j in 0..n {
            // Continuation j draws from the request's seed + j: a request with that seed
            // and n = 1 gives the same tokens.
            let mut sampler = plan.sampler.clone();
            sampler.seed = sampler.seed.wrapping_add(j as u64);
            group.push(Job {
                prompt: prompt.clone(),
                sampler,
                max_tokens,
                stop: stop.clone(),
                ignore_eos: plan.ignore_eos,
                logprobs: plan.logprobs,
                prompt_logprobs: echoes[p].is_some() && plan.logprobs.is_some(),
                embed: None,
                constraint: output.constraint(&app.trie, max_tokens)?,
                trie: Arc::clone(&app.trie),
                events: ChoiceSender::new(p * n + j, events.clone()),
            });
        }
        groups.push(group);
    }
    drop(events);
    let hold = enqueue(app, caller, groups)?;
    let head = ResponseHead {
        endpoint,
        id: app.response_id(match endpoint {
            Endpoint::Completions => "cmpl",
            Endpoint::Chat => "chatcmpl",
        }),
        created: crate::server::state::unix_now(),
        model: app.model_id.clone(),
    };
    let mut choices = Choices::new(
        head,
        ChoicesPlan {
            n,
            echoes,
            logprobs: plan.logprobs.is_some(),
            parser: output.parser,
            tool_format: output.tool_format,
        },
        &app.model,
    );
    if plan.stream {
        return Ok(stream_response(receiver, choices, plan.include_usage, hold));
    }
    while !choices.all_ended() {
        match receiver.recv().await {
            Some((index, event)) => choices.absorb(index, event)?,
            None => {
                return Err(ApiError::shutting_down());
            }
        }
    }
    drop(hold);
    Ok(Json(choices.response()).into_response())
}
