//! The grammar of a constrained chat reply: JSON for `response_format`, or tool calls
//! in the model's format for `tool_choice: "required"` or a named function (and, lazily,
//! from a call's opening marker on for `"auto"`), optionally after a reasoning block.

use crate::chat::harmony;
use crate::chat::tool_format::{HARMONY_CALL_OPEN, THINK_CLOSE, THINK_OPEN, ToolFormat};
use crate::error::Result;
use crate::grammar::Grammar;
use crate::grammar::gbnf_writer::{GbnfWriter, literal, text_until};
use crate::grammar::json_schema::{schema_rule, space_rule};
use crate::json::JsonValue;

/// A function a reply may call.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    /// Its name.
    pub name: String,
    /// The JSON schema of its arguments.
    pub parameters: JsonValue,
}

/// What the reply must be.
#[derive(Clone, Copy, Debug)]
pub enum OutputTarget<'a> {
    /// JSON this schema accepts.
    JsonSchema(&'a JsonValue),
    /// A JSON object.
    JsonObject,
    /// Calls of these functions, in `format`; several when `parallel` and the format
    /// has room for them.
    ToolCalls {
        /// The model's syntax.
        format: ToolFormat,
        /// The functions (one for a named `tool_choice`).
        functions: &'a [FunctionSpec],
        /// Several calls allowed.
        parallel: bool,
    },
}

/// Reasoning before the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Thinking {
    /// None.
    No,
    /// An optional `<think>...</think>` block first.
    Optional,
    /// The prompt opened the block: the reply starts inside it and closes it.
    Open,
    /// Harmony (gpt-oss): an optional analysis message first; the reply proper in the
    /// final channel (tool calls: their commentary message).
    Harmony,
}

/// The grammar of a reply that is `target`, after reasoning as `thinking` says.
///
/// Errors: [`LlmError::JsonSchema`](crate::LlmError::JsonSchema) for a schema (or a
/// function's parameters) the converter refuses.
pub fn output_grammar(target: OutputTarget<'_>, thinking: Thinking) -> Result<Grammar> {
    let mut w = GbnfWriter::default();
    let root = w.reserve("root");
    let body = match target {
        OutputTarget::JsonSchema(schema) => schema_rule(&mut w, schema, "value")?,
        OutputTarget::JsonObject => {
            let object =
                JsonValue::Object(vec![("type".into(), JsonValue::String("object".into()))]);
            schema_rule(&mut w, &object, "value")?
        }
        OutputTarget::ToolCalls {
            format,
            functions,
            parallel,
        } => tool_calls(&mut w, format, functions, parallel)?,
    };
    let prefix = match thinking {
        Thinking::No => String::new(),
        Thinking::Optional => {
            let until = text_until(&mut w, THINK_CLOSE, "thought");
            let block = w.rule(
                "think",
                format!("{} {until} [ \\n]{{0,3}}", literal(THINK_OPEN)),
            );
            format!("{block}? ")
        }
        Thinking::Open => {
            let until = text_until(&mut w, THINK_CLOSE, "thought");
            format!("{until} [ \\n]{{0,3}} ")
        }
        Thinking::Harmony => {
            let until = text_until(&mut w, harmony::END, "analysis");
            let open = format!("{}analysis{}", harmony::CHANNEL, harmony::MESSAGE);
            let next = format!("{}assistant", harmony::START);
            let analysis = w.rule(
                "analysis",
                format!("{} {until} {}", literal(&open), literal(&next)),
            );
            let final_channel = match target {
                OutputTarget::ToolCalls { .. } => String::new(),
                _ => format!(
                    "{} ",
                    literal(&format!("{}final{}", harmony::CHANNEL, harmony::MESSAGE))
                ),
            };
            format!("{analysis}? {final_channel}")
        }
    };
    w.define(&root, format!("{prefix}{body}"));
    Grammar::parse(&w.finish())
}

fn tool_calls(
    w: &mut GbnfWriter,
    format: ToolFormat,
    functions: &[FunctionSpec],
    parallel: bool,
) -> Result<String> {
    let parallel = parallel && format.allows_parallel();
    let space = space_rule(w);
    Ok(match format {
        ToolFormat::Hermes => {
            let any = json_call(w, format, functions, &space)?;
            let one = w.rule(
                "tool-call",
                format!(
                    "{} {space} {any} {}",
                    literal("<tool_call>"),
                    literal("</tool_call>")
                ),
            );
            let one = w.rule("tool-call-block", format!("{one} {space}"));
            if parallel { format!("{one}+") } else { one }
        }
        ToolFormat::Llama3 => {
            let any = json_call(w, format, functions, &space)?;
            format!("{}? {any}", literal("<|python_tag|>"))
        }
        ToolFormat::MistralNemo => {
            let any = json_call(w, format, functions, &space)?;
            let more = if parallel {
                format!("( \",\" {space} {any} )*")
            } else {
                String::new()
            };
            format!(
                "{} {space} \"[\" {space} {any} {more} \"]\" {space}",
                literal("[TOOL_CALLS]")
            )
        }
        ToolFormat::Harmony => harmony_call(w, functions)?,
    })
}

/// A call of one of `functions` as the JSON object `format` writes (name, arguments
/// and, where the format has them, an id).
fn json_call(
    w: &mut GbnfWriter,
    format: ToolFormat,
    functions: &[FunctionSpec],
    space: &str,
) -> Result<String> {
    let key = |k: &str| format!("{} {space} \":\" {space}", literal(&format!("\"{k}\"")));
    let mut alts = Vec::with_capacity(functions.len());
    for f in functions {
        let args = schema_rule(w, &f.parameters, &format!("{}-args", f.name))?;
        let name = literal(&JsonValue::String(f.name.clone()).to_json());
        let mut body = format!(
            "\"{{\" {space} {} {name} {space} \",\" {space} {} {args}",
            key("name"),
            key(format.arguments_key())
        );
        if format.writes_ids() {
            body.push_str(&format!(
                " \",\" {space} {} \"\\\"\" [a-zA-Z0-9]{{9}} \"\\\"\" {space}",
                key("id")
            ));
        }
        body.push_str(&format!(" \"}}\" {space}"));
        alts.push(w.rule(&format!("{}-call", f.name), body));
    }
    Ok(w.rule("call", alts.join(" | ")))
}

/// A harmony call of one of `functions`: the commentary message to the function with
/// its arguments as the body (it ends the generation, so there is one).
fn harmony_call(w: &mut GbnfWriter, functions: &[FunctionSpec]) -> Result<String> {
    let mut alts = Vec::with_capacity(functions.len());
    for f in functions {
        let args = schema_rule(w, &f.parameters, &format!("{}-args", f.name))?;
        let open = format!(
            "{HARMONY_CALL_OPEN}{} {}json{}",
            f.name,
            harmony::CONSTRAIN,
            harmony::MESSAGE
        );
        alts.push(w.rule(
            &format!("{}-call", f.name),
            format!("{} {args}", literal(&open)),
        ));
    }
    Ok(w.rule("call", alts.join(" | ")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::chat::reply_parser::ReplyParser;
    use crate::grammar::test_vocab::random_walk;
    use crate::grammar::{GrammarConstraint, TokenTrie};
    use crate::testing::SyntheticVocab;
    use crate::tokenizer::Vocabulary;

    /// A synthetic vocabulary of 1500 tokens and its trie (no preserved tokens).
    fn synthetic_vocab() -> (Vocabulary, Arc<TokenTrie>) {
        let mut md = crate::gguf::Metadata::new();
        SyntheticVocab::new(1500)
            .expect("vocab")
            .write_metadata(&mut md);
        let vocab = Vocabulary::from_gguf(&md).expect("vocab");
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        (vocab, trie)
    }

    #[test]
    fn tool_call_outputs_parse_into_valid_calls() {
        let (vocab, trie) = synthetic_vocab();
        let functions = vec![
            FunctionSpec {
                name: "get_weather".into(),
                parameters: JsonValue::parse(
                    r#"{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}"#,
                )
                .expect("json"),
            },
            FunctionSpec {
                name: "ping".into(),
                parameters: JsonValue::parse(r#"{"type": "object", "properties": {}}"#).expect("json"),
            },
        ];
        for format in [
            ToolFormat::Hermes,
            ToolFormat::Llama3,
            ToolFormat::MistralNemo,
            ToolFormat::Harmony,
        ] {
            let harmony = format == ToolFormat::Harmony;
            let thinkings = if harmony {
                [
                    (Thinking::No, true),
                    (Thinking::Harmony, true),
                    (Thinking::Harmony, false),
                ]
            } else {
                [
                    (Thinking::No, true),
                    (Thinking::Optional, false),
                    (Thinking::Open, true),
                ]
            };
            for (thinking, parallel) in thinkings {
                let target = OutputTarget::ToolCalls {
                    format,
                    functions: &functions,
                    parallel,
                };
                let grammar = output_grammar(target, thinking).expect("grammar");
                let parser = ReplyParser {
                    tools: Some(format),
                    reasoning: !harmony && thinking != Thinking::No,
                    open_reasoning: thinking == Thinking::Open,
                    harmony,
                };
                for seed in 0..6 {
                    let mut c =
                        GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
                    let budget = c.min_tokens().expect("finishable") + 30 + seed as usize * 10;
                    let out = random_walk(&mut c, &vocab, seed, budget);
                    let text = String::from_utf8(out).expect("utf-8");
                    let reply = parser.parse(&text, true);
                    assert!(
                        !reply.calls.is_empty(),
                        "{format:?} {thinking:?}: {text:?} -> {reply:?}"
                    );
                    assert!(parallel || reply.calls.len() == 1, "{text:?}");
                    assert!(!harmony || reply.calls.len() == 1, "{text:?}");
                    assert!(reply.content.is_empty(), "{text:?} -> {reply:?}");
                    for call in &reply.calls {
                        assert!(call.complete);
                        let args: serde_json::Value = serde_json::from_str(&call.arguments)
                            .unwrap_or_else(|e| panic!("{e}: {text:?}"));
                        match call.name.as_str() {
                            "get_weather" => {
                                assert!(args["city"].is_string(), "{args}");
                                assert!(
                                    args["days"].as_u64().is_some_and(|d| (1..=7).contains(&d)),
                                    "{args}"
                                );
                            }
                            "ping" => assert!(args.is_object()),
                            other => panic!("unknown function {other}"),
                        }
                        assert_eq!(call.id.is_some(), format.writes_ids(), "{text:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn harmony_json_replies_go_in_the_final_channel() {
        let (vocab, trie) = synthetic_vocab();
        let grammar = output_grammar(OutputTarget::JsonObject, Thinking::Harmony).expect("grammar");
        let parser = ReplyParser {
            tools: None,
            reasoning: false,
            open_reasoning: false,
            harmony: true,
        };
        let mut with_analysis = 0;
        for seed in 0..8 {
            let mut c = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
            let budget = c.min_tokens().expect("finishable") + 20 + seed as usize * 8;
            let text = String::from_utf8(random_walk(&mut c, &vocab, seed, budget)).expect("utf-8");
            assert!(text.contains("<|channel|>final<|message|>"), "{text:?}");
            with_analysis += usize::from(text.starts_with("<|channel|>analysis"));
            let reply = parser.parse(&text, true);
            let value: serde_json::Value = serde_json::from_str(&reply.content)
                .unwrap_or_else(|e| panic!("{e}: {text:?} -> {reply:?}"));
            assert!(value.is_object() && reply.calls.is_empty(), "{text:?}");
        }
        eprintln!("{with_analysis} of 8 walks wrote an analysis message first");
    }
}
