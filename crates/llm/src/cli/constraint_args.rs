//! `--grammar FILE` and `--json-schema FILE`: the output constraint `tempra run` and
//! `tempra chat` share.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use tempra_llm::grammar::{Grammar, GrammarConstraint, TokenTrie};
use tempra_llm::json::JsonValue;
use tempra_llm::tokenizer::Vocabulary;

/// Output constraint flags.
#[derive(Debug, clap::Args)]
pub(crate) struct ConstraintArgs {
    /// Hold the output to a GBNF grammar (llama.cpp's syntax; `root` is the output).
    #[arg(long, value_name = "FILE", conflicts_with = "json_schema")]
    grammar: Option<PathBuf>,
    /// Hold the output to JSON that this JSON schema accepts.
    #[arg(long = "json-schema", value_name = "FILE")]
    json_schema: Option<PathBuf>,
}

/// A grammar ready to constrain outputs of one vocabulary.
pub(crate) struct OutputGrammar {
    grammar: Grammar,
    trie: Arc<TokenTrie>,
}

impl ConstraintArgs {
    /// The grammar the flags name, compiled for `vocab`, or `None` without flags.
    pub(crate) fn load(&self, vocab: &Vocabulary) -> anyhow::Result<Option<OutputGrammar>> {
        let grammar = match (&self.grammar, &self.json_schema) {
            (Some(path), _) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
                Grammar::parse(&text).with_context(|| path.display().to_string())?
            }
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
                let schema = JsonValue::parse(&text).with_context(|| path.display().to_string())?;
                Grammar::from_json_schema(&schema).with_context(|| path.display().to_string())?
            }
            (None, None) => return Ok(None),
        };
        let trie = Arc::new(TokenTrie::new(vocab, &[]));
        // Compile once now, so that errors show before the model runs.
        GrammarConstraint::new(&grammar, Arc::clone(&trie))?;
        Ok(Some(OutputGrammar { grammar, trie }))
    }
}

impl OutputGrammar {
    /// A fresh constraint for one output of at most `budget` tokens.
    ///
    /// Errors: the budget is below the fewest tokens that finish the grammar, or the
    /// vocabulary cannot spell a completion one byte at a time.
    pub(crate) fn constraint(&self, budget: usize) -> anyhow::Result<GrammarConstraint> {
        let c = GrammarConstraint::new(&self.grammar, Arc::clone(&self.trie))?;
        match c.min_tokens() {
            None => bail!(
                "the vocabulary has no single-byte tokens for what the grammar needs, so the output cannot be guaranteed to finish"
            ),
            Some(min) if min > budget => bail!(
                "the shortest output the grammar allows takes {min} tokens (with the end token), but only {budget} fit (raise -n or --ctx)"
            ),
            Some(_) => Ok(c),
        }
    }
}
