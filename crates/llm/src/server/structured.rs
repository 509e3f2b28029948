//! Structured output for a request: `response_format` (`json_object`, `json_schema`),
//! llama-server's `grammar` and `json_schema`, and `tools` with `tool_choice` and
//! `parallel_tool_calls`, checked (a 400 naming the field at fault) and turned into the
//! grammar the sampler holds the output to, the triggers of a lazy one, and the parser of
//! the reply.

use std::sync::Arc;

use crate::chat::{
    FunctionSpec, OutputTarget, ReplyParser, Thinking, ToolFormat, opens_reasoning, output_grammar,
};
use crate::error::LlmError;
use crate::grammar::{Grammar, GrammarConstraint, OutputConstraint, TokenTrie};
use crate::json::JsonValue;
use crate::server::errors::ApiError;
use crate::server::openai::GenerationRequest;

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    /// The model decides (lazy grammar from a call's marker on).
    Auto,
    /// No calls: tools are not given to the model.
    None,
    /// At least one call.
    Required,
    /// A call of this function.
    Named(String),
}

/// A request's tools, checked.
#[derive(Debug)]
pub(crate) struct RequestTools {
    /// The definitions as given (for the template).
    pub(crate) definitions: Vec<JsonValue>,
    /// Names and parameter schemas.
    pub(crate) functions: Vec<FunctionSpec>,
    pub(crate) choice: ToolChoice,
    pub(crate) parallel: bool,
}

/// What a request's output is held to, before the budget is known.
#[derive(Debug, Default)]
pub(crate) struct OutputPlan {
    /// The grammar and the request field it comes from (for errors).
    grammar: Option<(Grammar, String)>,
    /// Triggers for a lazy grammar (tool_choice auto).
    triggers: Vec<crate::grammar::Trigger>,
    /// How to read the reply into reasoning, content and tool calls (chat only).
    pub(crate) parser: Option<ReplyParser>,
    /// The tool format of the reply's calls (ids are generated in its style).
    pub(crate) tool_format: Option<ToolFormat>,
}

fn invalid(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(Some(param), message)
}

/// A converter or grammar error as a 400: schema errors name `base` plus the pointer
/// (`#/properties/a` → `base.properties.a`).
pub(crate) fn grammar_error(base: &str, e: LlmError) -> ApiError {
    match &e {
        LlmError::JsonSchema { pointer, .. } => {
            let tail: String = pointer
                .trim_start_matches('#')
                .split('/')
                .filter(|s| !s.is_empty())
                .map(|s| format!(".{}", s.replace("~1", "/").replace("~0", "~")))
                .collect();
            let param = format!("{base}{tail}");
            invalid(&param, format!("`{base}`: {e}"))
        }
        _ => invalid(base, format!("`{base}`: {e}")),
    }
}

/// Whether `name` is a valid function name (OpenAI's rule).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The request's tools and tool choice, checked; `None` without tools.
pub(crate) fn request_tools(request: &GenerationRequest) -> Result<Option<RequestTools>, ApiError> {
    let Some(tools) = &request.tools else {
        if request.tool_choice.as_ref().is_some_and(|c| !c.is_null()) {
            return Err(invalid("tool_choice", "`tool_choice` needs `tools`"));
        }
        return Ok(None);
    };
    let list = tools
        .as_array()
        .ok_or_else(|| invalid("tools", "`tools` must be a list of tool definitions"))?;
    let mut functions: Vec<FunctionSpec> = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        if tool.get("type").and_then(JsonValue::as_str) != Some("function") {
            return Err(invalid(
                &format!("{at}.type"),
                format!("`{at}.type` must be \"function\""),
            ));
        }
        let f = tool
            .get("function")
            .filter(|f| f.as_object().is_some())
            .ok_or_else(|| {
                invalid(
                    &format!("{at}.function"),
                    format!("`{at}.function` must be an object"),
                )
            })?;
        let name_param = format!("{at}.function.name");
        let name = f
            .get("name")
            .and_then(JsonValue::as_str)
            .filter(|n| valid_name(n))
            .ok_or_else(|| {
                invalid(
                    &name_param,
                    format!("`{name_param}` must be 1 to 64 letters, digits, `_` or `-`"),
                )
            })?;
        if functions.iter().any(|g| g.name == name) {
            return Err(invalid(
                &name_param,
                format!("two tools are named {name:?}"),
            ));
        }
        let params_param = format!("{at}.function.parameters");
        let parameters = match f.get("parameters") {
            None | Some(JsonValue::Null) => {
                JsonValue::parse(r#"{"type": "object", "properties": {}}"#)
                    .map_err(|e| ApiError::invalid(None, e.to_string()))?
            }
            Some(p) => p.clone(),
        };
        // Refuse what the grammar cannot hold now, naming the tool.
        Grammar::from_json_schema(&parameters).map_err(|e| grammar_error(&params_param, e))?;
        functions.push(FunctionSpec {
            name: name.to_owned(),
            parameters,
        });
    }
    let choice = match &request.tool_choice {
        None | Some(JsonValue::Null) => ToolChoice::Auto,
        Some(JsonValue::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(invalid(
                    "tool_choice",
                    format!(
                        "`tool_choice` {other:?} is not one of auto, none, required or a function"
                    ),
                ));
            }
        },
        Some(v) => {
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(JsonValue::as_str)
                .ok_or_else(|| {
                    invalid(
                        "tool_choice",
                        "`tool_choice` must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    )
                })?;
            if !functions.iter().any(|f| f.name == name) {
                return Err(invalid(
                    "tool_choice",
                    format!("`tool_choice` names {name:?}, which is not one of the tools"),
                ));
            }
            ToolChoice::Named(name.to_owned())
        }
    };
    if functions.is_empty() && choice != ToolChoice::None && choice != ToolChoice::Auto {
        return Err(invalid(
            "tool_choice",
            "`tool_choice` needs at least one tool",
        ));
    }
    Ok(Some(RequestTools {
        definitions: list.to_vec(),
        functions,
        choice,
        parallel: request.parallel_tool_calls.unwrap_or(true),
    }))
}

/// The template's keyword arguments: `chat_template_kwargs` and `enable_thinking`.
pub(crate) fn template_kwargs(
    request: &GenerationRequest,
) -> Result<Vec<(String, JsonValue)>, ApiError> {
    let mut kwargs = match &request.chat_template_kwargs {
        None | Some(JsonValue::Null) => Vec::new(),
        Some(JsonValue::Object(entries)) => entries.clone(),
        Some(_) => {
            return Err(invalid(
                "chat_template_kwargs",
                "`chat_template_kwargs` must be an object",
            ));
        }
    };
    if let Some(on) = request.enable_thinking {
        kwargs.retain(|(k, _)| k != "enable_thinking");
        kwargs.push(("enable_thinking".into(), JsonValue::Bool(on)));
    }
    Ok(kwargs)
}

/// What the template tells about a chat: its tool format, whether it writes reasoning,
/// and the rendered prompt.
pub(crate) struct ChatContext<'a> {
    pub(crate) tool_format: Option<ToolFormat>,
    pub(crate) reasoning: bool,
    pub(crate) prompt: &'a str,
    pub(crate) kwargs: &'a [(String, JsonValue)],
}

impl ChatContext<'_> {
    /// How reasoning precedes a constrained reply.
    fn thinking(&self) -> Thinking {
        if self.tool_format == Some(ToolFormat::Harmony) {
            return Thinking::Harmony;
        }
        let off = self
            .kwargs
            .iter()
            .any(|(k, v)| k == "enable_thinking" && v.as_bool() == Some(false));
        if !self.reasoning || off {
            Thinking::No
        } else if opens_reasoning(self.prompt) {
            Thinking::Open
        } else {
            Thinking::Optional
        }
    }
}

/// The output plan of a request (`chat`: the template's context; `None` for
/// completions).
pub(crate) fn output_plan(
    request: &GenerationRequest,
    tools: Option<&RequestTools>,
    chat: Option<&ChatContext<'_>>,
) -> Result<OutputPlan, ApiError> {
    let thinking = chat.map_or(Thinking::No, ChatContext::thinking);
    let mut plan = OutputPlan::default();
    let calls = tools.filter(|t| t.choice != ToolChoice::None);
    if let Some(chat) = chat {
        plan.tool_format = calls.and(chat.tool_format);
        // A harmony reply is always messages in channels, tools or not.
        let harmony = chat.tool_format == Some(ToolFormat::Harmony);
        if chat.reasoning || plan.tool_format.is_some() || harmony {
            plan.parser = Some(ReplyParser {
                tools: plan.tool_format,
                reasoning: chat.reasoning,
                open_reasoning: chat.reasoning && opens_reasoning(chat.prompt),
                harmony,
            });
        }
    }
    let response = response_format(request)?;
    let shape = [
        request.grammar.as_ref().map(|_| "grammar"),
        request
            .json_schema
            .as_ref()
            .filter(|v| !v.is_null())
            .map(|_| "json_schema"),
        response.as_ref().map(|_| "response_format"),
    ];
    let given: Vec<&str> = shape.into_iter().flatten().collect();
    if given.len() > 1 {
        return Err(invalid(
            given[1],
            format!("`{}` and `{}` cannot be given together", given[0], given[1]),
        ));
    }
    if let (Some(field), Some(_)) = (given.first(), calls) {
        return Err(invalid(
            field,
            format!(
                "`{field}` cannot be combined with `tools` (use tool_choice \"none\" or drop the tools)"
            ),
        ));
    }
    if let Some(text) = &request.grammar {
        let grammar = Grammar::parse(text).map_err(|e| grammar_error("grammar", e))?;
        plan.grammar = Some((grammar, "grammar".into()));
    } else if let Some(schema) = request.json_schema.as_ref().filter(|v| !v.is_null()) {
        let grammar = output_grammar(OutputTarget::JsonSchema(schema), thinking)
            .map_err(|e| grammar_error("json_schema", e))?;
        plan.grammar = Some((grammar, "json_schema".into()));
    } else if let Some((schema, param)) = response {
        let target = match &schema {
            Some(s) => OutputTarget::JsonSchema(s),
            None => OutputTarget::JsonObject,
        };
        let grammar = output_grammar(target, thinking).map_err(|e| grammar_error(&param, e))?;
        plan.grammar = Some((grammar, "response_format".into()));
    } else if let Some(tools) = calls {
        let Some(format) = plan.tool_format else {
            return Err(invalid(
                "tools",
                "the model's chat template does not write tool calls (no known tool-call format in it); give a template with --chat-template-file",
            ));
        };
        let named: Vec<FunctionSpec>;
        let functions = match &tools.choice {
            ToolChoice::Named(name) => {
                named = tools
                    .functions
                    .iter()
                    .filter(|f| &f.name == name)
                    .cloned()
                    .collect();
                &named
            }
            _ => &tools.functions,
        };
        let lazy = tools.choice == ToolChoice::Auto;
        let target = OutputTarget::ToolCalls {
            format,
            functions,
            parallel: tools.parallel,
        };
        let grammar = output_grammar(target, if lazy { Thinking::No } else { thinking })
            .map_err(|e| grammar_error("tools", e))?;
        if lazy {
            plan.triggers = format.triggers();
        }
        plan.grammar = Some((grammar, "tools".into()));
    }
    Ok(plan)
}

/// `response_format`: `None` for text; `Some((schema, param))` for JSON, `schema` `None`
/// for any object.
fn response_format(
    request: &GenerationRequest,
) -> Result<Option<(Option<JsonValue>, String)>, ApiError> {
    let Some(format) = request.response_format.as_ref().filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(JsonValue::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some((
            format.get("schema").filter(|s| !s.is_null()).cloned(),
            "response_format.schema".into(),
        ))),
        Some("json_schema") => {
            let inner = format.get("json_schema").ok_or_else(|| {
                invalid(
                    "response_format.json_schema",
                    "`response_format.json_schema` is required",
                )
            })?;
            let schema = inner
                .get("schema")
                .cloned()
                .unwrap_or(JsonValue::Bool(true));
            Ok(Some((
                Some(schema),
                "response_format.json_schema.schema".into(),
            )))
        }
        _ => Err(invalid(
            "response_format.type",
            "`response_format.type` must be text, json_object or json_schema",
        )),
    }
}

impl OutputPlan {
    /// The constraint for an output of at most `budget` tokens over `trie`, or a 400:
    /// the grammar needs tokens the vocabulary lacks, or more than `budget`.
    pub(crate) fn constraint(
        &self,
        trie: &Arc<TokenTrie>,
        budget: usize,
    ) -> Result<Option<OutputConstraint>, ApiError> {
        let Some((grammar, param)) = &self.grammar else {
            return Ok(None);
        };
        let c = GrammarConstraint::new(grammar, Arc::clone(trie))
            .map_err(|e| grammar_error(param, e))?;
        if !self.triggers.is_empty() {
            return Ok(Some(OutputConstraint::lazy(c, self.triggers.clone())));
        }
        match c.min_tokens() {
            None => Err(invalid(
                param,
                format!(
                    "`{param}`: the model's vocabulary has no single-byte tokens for what this output needs, so it cannot be guaranteed to finish"
                ),
            )),
            Some(min) if min > budget => Err(invalid(
                "max_tokens",
                format!(
                    "the shortest output `{param}` allows takes {min} tokens (with the end token), but max_tokens and the context leave {budget}"
                ),
            )),
            Some(_) => Ok(Some(OutputConstraint::always(c))),
        }
    }

    /// Whether the output is held to a grammar from the start.
    pub(crate) fn is_constrained(&self) -> bool {
        self.grammar.is_some() && self.triggers.is_empty()
    }
}
