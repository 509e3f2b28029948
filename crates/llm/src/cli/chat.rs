//! `tempra chat`: an interactive chat in the terminal, with the model's chat template and
//! streamed replies. Reads one user message per line from stdin (a pipe works too).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use tempra_llm::chat::{ChatMessage, ChatTemplate};
use tempra_llm::engine::{Generation, Sampler, StopConditions};

use crate::cli::constraint_args::ConstraintArgs;
use crate::cli::engine_args::EngineArgs;
use crate::cli::sampling_args::SamplingArgs;

/// Arguments of `tempra chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// A system message to start the conversation with.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// A Jinja chat template file to use instead of the model's.
    #[arg(long = "chat-template-file", value_name = "FILE")]
    chat_template_file: Option<PathBuf>,
    /// The most tokens per reply (default: until an end token or a full context).
    #[arg(short = 'n', long = "n-predict", value_name = "N")]
    n: Option<usize>,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    constraint: ConstraintArgs,
}

/// Runs `tempra chat` until end of input.
pub(crate) fn run(args: ChatArgs) -> anyhow::Result<()> {
    let model = args.engine.load()?;
    let vocab = model.vocab();
    let template = match &args.chat_template_file {
        Some(path) => {
            let source =
                std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
            ChatTemplate::for_vocab(&source, vocab)?
        }
        None => ChatTemplate::from_metadata(model.file().metadata(), vocab)?,
    };
    if template.is_fallback() {
        eprintln!("note: the model has no chat template; using ChatML");
    }
    let grammar = args.constraint.load(vocab)?;
    let interactive = std::io::stdin().is_terminal();
    let mut seed = args.sampling.seed();
    let mut history: Vec<ChatMessage> = args
        .system
        .iter()
        .map(|s| ChatMessage::new("system", s.clone()))
        .collect();
    let mut session = model.session()?;
    let mut stdout = std::io::stdout().lock();
    let mut lines = std::io::stdin().lock().lines();
    loop {
        if interactive {
            eprint!("> ");
        }
        let Some(line) = lines.next() else { break };
        let line = line.context("reading stdin")?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        history.push(ChatMessage::new("user", line));
        let mut prompt = template.prompt_tokens(&history, vocab)?;
        if prompt.len() >= model.context_length() && history.len() > 1 {
            eprintln!(
                "the conversation is {} tokens, the context holds {}: forgetting the earlier turns (raise --ctx for longer chats)",
                prompt.len(),
                model.context_length()
            );
            let last = history.pop();
            history.retain(|m| m.role == "system");
            history.extend(last);
            prompt = template.prompt_tokens(&history, vocab)?;
        }
        if prompt.len() >= model.context_length() {
            eprintln!(
                "the message makes a prompt of {} tokens, the context holds {}: not sent",
                prompt.len(),
                model.context_length()
            );
            history.pop();
            continue;
        }
        // Keep the part of the conversation the session already holds.
        let held = session.tokens();
        let common = held.iter().zip(&prompt).take_while(|(a, b)| a == b).count();
        let reuse = common.min(prompt.len() - 1);
        session.truncate(reuse);
        let sampler = Sampler::new(args.sampling.config(seed));
        seed = seed.wrapping_add(1);
        let stop = StopConditions {
            max_tokens: args.n,
            stop_strings: template.stop_strings(),
            ignore_eog: false,
        };
        let budget = args
            .n
            .unwrap_or(usize::MAX)
            .min(model.context_length() + 1 - prompt.len());
        let constraint = match grammar.as_ref().map(|g| g.constraint(budget)).transpose() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{e:#}: not sent");
                history.pop();
                continue;
            }
        };
        let mut generation = Generation::new(&mut session, &prompt[reuse..], sampler, stop)?;
        if let Some(c) = constraint {
            generation = generation.with_constraint(c);
        }
        let mut reply = String::new();
        for piece in generation.by_ref() {
            let piece = piece?;
            write!(stdout, "{}", piece.text)?;
            stdout.flush()?;
            reply.push_str(&piece.text);
        }
        let rest = generation.take_remaining_text();
        writeln!(stdout, "{rest}")?;
        stdout.flush()?;
        reply.push_str(&rest);
        history.push(ChatMessage::new("assistant", reply.trim()));
    }
    Ok(())
}
