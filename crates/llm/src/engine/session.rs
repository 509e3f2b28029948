//! `Session`: one conversation's state (KV cache and tokens) over a shared [`Model`].

use std::sync::Arc;

use tempra_autograd::no_grad;
use tempra_tensor::Tensor;

use crate::engine::forward::{LogitRows, forward_step};
use crate::engine::kv_cache::KvCache;
use crate::engine::model::Model;
use crate::error::{LlmError, Result};

/// A sequence being processed: owns its KV cache (allocated once, in the backend's
/// memory) and the tokens it holds. `prefill` runs a prompt (in chunks of the executor's
/// step arena), `step` one token; both return the logits of the last position, on the
/// host.
#[derive(Debug)]
pub struct Session {
    model: Arc<Model>,
    cache: KvCache,
    tokens: Vec<u32>,
}

impl Session {
    pub(crate) fn new(model: Arc<Model>, cache: KvCache) -> Session {
        let capacity = cache.capacity();
        Session {
            model,
            cache,
            tokens: Vec::with_capacity(capacity),
        }
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The tokens processed so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Positions held (`tokens().len()`).
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether nothing has been processed.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// The context length.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The KV cache.
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Runs `tokens` as one batch after what the session holds; returns the last
    /// position's logits `[vocab]`.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Tensor> {
        self.run(tokens, LogitRows::Last)?
            .squeeze(0)
            .map_err(LlmError::from)
    }

    /// Runs one token; returns its logits `[vocab]`.
    pub fn step(&mut self, token: u32) -> Result<Tensor> {
        self.prefill(&[token])
    }

    /// Runs `tokens` and returns the logits of every one of them `[T, vocab]`.
    pub fn logits_all(&mut self, tokens: &[u32]) -> Result<Tensor> {
        self.run(tokens, LogitRows::All)
    }

    /// Runs `tokens` and returns the hidden state of every one of them after the
    /// output norm `[T, embedding_length]` (what embeddings pool).
    pub fn hidden_states(&mut self, tokens: &[u32]) -> Result<Tensor> {
        self.run(tokens, LogitRows::Hidden)
    }

    fn run(&mut self, tokens: &[u32], rows: LogitRows) -> Result<Tensor> {
        let model = Arc::clone(&self.model);
        let config = model.config();
        if self.cache.len() + tokens.len() > self.cache.capacity() {
            return Err(LlmError::ContextFull {
                needed: self.cache.len() + tokens.len(),
                capacity: self.cache.capacity(),
            });
        }
        // Checked whole before any chunk runs: a bad id in a later chunk writes nothing.
        if let Some(&bad) = tokens.iter().find(|&&id| id as usize >= config.vocab_size) {
            return Err(LlmError::TokenId {
                id: bad as u64,
                n_vocab: config.vocab_size,
            });
        }
        let _guard = no_grad();
        let start = self.cache.len();
        let result = self.run_chunks(&model, tokens, rows);
        if result.is_err() {
            self.cache.truncate(start);
        } else {
            self.tokens.extend_from_slice(tokens);
        }
        result
    }

    /// Runs `tokens` in chunks of the step arena's rows and returns the logits on the
    /// host.
    fn run_chunks(&mut self, model: &Model, tokens: &[u32], rows: LogitRows) -> Result<Tensor> {
        let executor = model.executor();
        let ctx = executor.ctx();
        let step = executor.arena_capacity().max_batch_tokens.max(1);
        let chunks = tokens.len().div_ceil(step);
        // Every position's logits over several chunks are gathered here; one chunk's (or
        // the last position's) are returned as they come.
        let mut gathered: Vec<f32> = Vec::new();
        let mut last = None;
        for (i, chunk) in tokens.chunks(step).enumerate() {
            let want = match rows {
                LogitRows::Last if i + 1 < chunks => None,
                rows => Some(rows),
            };
            let logits = executor.run(|out| {
                let logits = forward_step(
                    out,
                    model.config(),
                    model.forward_weights(),
                    chunk,
                    Some(&mut self.cache),
                    want,
                )?;
                logits
                    .map(|l| ctx.to_host(l.tensor()).map_err(LlmError::from))
                    .transpose()
            })?;
            match logits {
                Some(l) if rows != LogitRows::Last && chunks > 1 => {
                    gathered.extend_from_slice(logits_slice(&l)?)
                }
                Some(l) => last = Some(l),
                None => {}
            }
        }
        match last {
            Some(logits) => Ok(logits),
            None if chunks > 1 => {
                let width = match rows {
                    LogitRows::Hidden => model.config().embedding_length,
                    _ => model.config().vocab_size,
                };
                Ok(Tensor::owned_from_slice(&gathered, &[tokens.len(), width])?)
            }
            None => Err(LlmError::Argument {
                what: "the forward computed no logits".into(),
            }),
        }
    }

    /// The cache and token list, for the batched decode (which advances both).
    pub(crate) fn state_mut(&mut self) -> (&mut KvCache, &mut Vec<u32>) {
        (&mut self.cache, &mut self.tokens)
    }

    /// Makes this session hold `source`'s first `n` positions and tokens (a fork of a
    /// prefilled prompt: each continuation goes on from there in its own session).
    /// The keys and values are copied as stored, so the fork's next logits equal what
    /// `source` would compute.
    ///
    /// Errors: sessions of different models or KV dtypes, `n` past `source`'s length;
    /// this session is then empty.
    pub fn fork_from(&mut self, source: &Session, n: usize) -> Result<()> {
        if !Arc::ptr_eq(&self.model, &source.model) {
            return Err(LlmError::Argument {
                what: "a session can only fork a session of the same model".into(),
            });
        }
        self.tokens.clear();
        let ctx = self.model.executor().ctx();
        if let Err(e) = self.cache.copy_prefix_from(ctx, &source.cache, n) {
            self.cache.reset();
            return Err(e);
        }
        self.tokens.extend_from_slice(&source.tokens[..n]);
        Ok(())
    }

    /// Keeps the first `n` positions.
    pub fn truncate(&mut self, n: usize) {
        self.cache.truncate(n);
        self.tokens.truncate(self.cache.len());
    }

    /// Forgets everything (no memory is touched or freed).
    pub fn reset(&mut self) {
        self.cache.reset();
        self.tokens.clear();
    }
}

/// The f32 values of a contiguous logits row (e.g. from [`Session::step`]).
pub fn logits_slice(logits: &Tensor) -> Result<&[f32]> {
    let range = logits
        .layout()
        .contiguous_range()
        .ok_or_else(|| LlmError::Argument {
            what: "logits must be contiguous".into(),
        })?;
    Ok(&logits.host_slice::<f32>()?[range])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{ArenaCapacity, LoadOptions, forward};
    use crate::testing::{ModelShape, RandomModelSpec, random_model};

    /// A random model whose executor's arena holds 8 tokens and 3 logit rows.
    fn model() -> Arc<Model> {
        let shape = ModelShape::parse("dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300")
            .expect("shape");
        let file = random_model(&RandomModelSpec::llama(shape).with_seed(3)).expect("model");
        Model::from_file(
            file,
            &LoadOptions {
                threads: Some(2),
                context_length: Some(64),
                kv_type: tempra_tensor::DType::F32,
                arena: Some(ArenaCapacity {
                    max_batch_tokens: 8,
                    max_logit_rows: 3,
                }),
                ..LoadOptions::default()
            },
        )
        .expect("load")
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    /// The logits of every position of `tokens` by the pool-output forward in one pass.
    fn one_pass(model: &Model, tokens: &[u32]) -> Vec<f32> {
        let _guard = no_grad();
        let logits = forward(
            model.autograd(),
            model.config(),
            model.forward_weights(),
            tokens,
            None,
            LogitRows::All,
        )
        .expect("forward");
        logits.tensor().to_vec_f32().expect("values")
    }

    #[test]
    fn prompts_longer_than_the_arena_run_in_chunks_with_the_same_logits() {
        let model = model();
        let tokens: Vec<u32> = (0..21).map(|i| (i * 37 + 11) % 300).collect();
        let reference = one_pass(&model, &tokens);
        let vocab = 300;

        // 21 tokens: three chunks of the 8-token arena, the last position's logits.
        let mut s = model.session().expect("session");
        let last = s.prefill(&tokens).expect("prefill");
        let d = max_diff(logits_slice(&last).expect("row"), &reference[20 * vocab..]);
        assert!(d < 1e-4, "chunked prefill: {d}");
        assert_eq!((s.len(), s.tokens()), (21, tokens.as_slice()));
        drop(last);

        // Every position's logits: chunks of the 8-token arena, the logits from the pool.
        let mut s = model.session().expect("session");
        let all = s.logits_all(&tokens).expect("logits");
        assert_eq!(all.dims(), [21, vocab]);
        let d = max_diff(logits_slice(&all).expect("rows"), &reference);
        assert!(d < 1e-4, "chunked logits_all: {d}");
        drop(all);

        // Decoding token by token afterwards reads what the chunks cached.
        let mut s = model.session().expect("session");
        drop(s.prefill(&tokens[..13]).expect("prefill"));
        for (i, &t) in tokens[13..].iter().enumerate() {
            let row = s.step(t).expect("step");
            let p = 13 + i;
            let d = max_diff(
                logits_slice(&row).expect("row"),
                &reference[p * vocab..][..vocab],
            );
            assert!(d < 1e-4, "decode at {p}: {d}");
        }
        // Every step ran in the arena: nothing fell back to the pool, no slot buffer was
        // replaced (each step's logits were dropped before the next).
        let stats = model.executor().arena_stats();
        assert_eq!(stats.steps, 3 + 3 + 2 + 8, "{stats:?}");
        assert_eq!((stats.pool_outputs, stats.replaced), (0, 0), "{stats:?}");
    }

    #[test]
    fn forks_continue_as_the_source_would_for_every_cache_type() {
        let shape = ModelShape::parse("dim=128,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300")
            .expect("shape");
        for kv_type in [
            tempra_tensor::DType::F32,
            tempra_tensor::DType::F16,
            tempra_tensor::DType::Q8_0,
            tempra_tensor::DType::Q4_0,
        ] {
            let file = random_model(&RandomModelSpec::llama(shape).with_seed(5)).expect("model");
            let model = Model::from_file(
                file,
                &LoadOptions {
                    threads: Some(1),
                    context_length: Some(32),
                    kv_type,
                    ..LoadOptions::default()
                },
            )
            .expect("load");
            let prompt: Vec<u32> = (0..11).map(|i| (i * 53 + 7) % 300).collect();
            let mut source = model.session().expect("session");
            drop(source.prefill(&prompt).expect("prefill"));
            // The fork's slot held something else before.
            let mut fork = model.session().expect("session");
            drop(fork.prefill(&[9, 9, 9, 9]).expect("prefill"));
            fork.fork_from(&source, 9).expect("fork");
            assert_eq!(fork.tokens(), &prompt[..9]);
            for &t in &prompt[9..] {
                drop(fork.step(t).expect("step"));
            }
            let a = logits_slice(&source.step(42).expect("step"))
                .expect("row")
                .to_vec();
            let b = logits_slice(&fork.step(42).expect("step"))
                .expect("row")
                .to_vec();
            assert_eq!(a, b, "{kv_type}: the fork's logits differ");
            // Past the source's length: an error, and the fork is empty.
            let err = fork.fork_from(&source, 13).expect_err("too long");
            assert!(matches!(err, LlmError::ContextFull { .. }), "{err}");
            assert_eq!((fork.len(), fork.tokens().len()), (0, 0));
        }
    }

    #[test]
    fn embeddings_in_chunks_equal_one_pass() {
        use crate::engine::{Pooling, pool};
        let model = model();
        let tokens: Vec<u32> = (0..21).map(|i| (i * 41 + 5) % 300).collect();
        let _guard = no_grad();
        let hidden = forward(
            model.autograd(),
            model.config(),
            model.forward_weights(),
            &tokens,
            None,
            LogitRows::Hidden,
        )
        .expect("forward");
        let hidden = hidden.tensor().to_vec_f32().expect("values");
        let dim = model.config().embedding_length;
        assert_eq!(hidden.len(), 21 * dim);
        let mut s = model.session().expect("session");
        drop(s.prefill(&[3, 4, 5]).expect("prefill"));
        for pooling in [Pooling::Mean, Pooling::Cls, Pooling::Last] {
            // 21 tokens in chunks of the 8-token arena, after other tokens: reset first.
            let got = s.embed(&tokens, pooling, true).expect("embed");
            let want = pool(&hidden, dim, pooling, true);
            assert!(max_diff(&got, &want) < 1e-5, "{pooling}");
            assert_eq!(s.tokens(), tokens.as_slice());
        }
        let err = s.embed(&[], Pooling::Mean, true).expect_err("empty");
        assert!(matches!(err, LlmError::Argument { .. }), "{err}");
    }

    #[test]
    fn held_logits_keep_their_values_and_bad_input_loses_nothing() {
        let model = model();
        let mut s = model.session().expect("session");
        let first = s.prefill(&[1, 2, 3]).expect("prefill");
        let kept = logits_slice(&first).expect("row").to_vec();
        // `first` still views the logits slot: the next step gets a fresh buffer.
        let second = s.step(4).expect("step");
        assert_eq!(logits_slice(&first).expect("row"), kept.as_slice());
        assert_ne!(logits_slice(&second).expect("row"), kept.as_slice());
        assert_eq!(model.executor().arena_stats().replaced, 1);
        drop((first, second));

        // A bad id in a later chunk: nothing is written, the session is unchanged.
        let mut long: Vec<u32> = (0..20).collect();
        long[17] = 300;
        let err = s.prefill(&long).expect_err("bad id");
        assert!(matches!(err, LlmError::TokenId { id: 300, .. }), "{err}");
        assert_eq!((s.len(), s.tokens()), (4, &[1u32, 2, 3, 4][..]));
        let err = s.prefill(&[5; 61]).expect_err("full");
        assert!(
            matches!(err, LlmError::ContextFull { needed: 65, .. }),
            "{err}"
        );
        assert_eq!(s.len(), 4);
    }
}
