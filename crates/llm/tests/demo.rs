//! The demo model: the BPE trainer, a short training run, and the embedded model
//! (`assets/demo-stories.gguf`) loading, its greedy output and held-out loss.

use std::collections::HashMap;
use std::sync::Arc;

use tempra_llm::demo::{
    DemoShape, StoryGenerator, TokenStream, TrainConfig, embedded_demo_model,
    held_out_loss_of_gguf, train_demo,
};
use tempra_llm::engine::{LoadOptions, Model, logits_slice};
use tempra_llm::gguf::{Limits, Metadata, keys};
use tempra_llm::tokenizer::{
    BpeTrainerConfig, PreTokenizer, TokenizeOptions, Vocabulary, train_byte_level_bpe,
};

/// The held-out loss (nats per token) the embedded model must stay below on fresh
/// stories; `docs/perf-log.md` records the value measured at training time.
const EMBEDDED_HELD_OUT_LOSS_BOUND: f64 = 0.8;

/// BPE by definition, from the GGUF metadata: per word, repeatedly merge the adjacent
/// pair of lowest rank (the merge list's order).
fn reference_bpe(md: &Metadata, vocab: &Vocabulary, text: &str) -> Vec<u32> {
    let mut ranks: HashMap<(u32, u32), (usize, u32)> = HashMap::new();
    let id = |t: &[u8]| vocab.token_id(t).unwrap();
    for (rank, line) in md
        .get_string_array(keys::TOKENIZER_MERGES)
        .unwrap()
        .iter()
        .enumerate()
    {
        let space = line.iter().position(|&b| b == b' ').unwrap();
        let (l, r) = (&line[..space], &line[space + 1..]);
        let merged = [l, r].concat();
        ranks.insert((id(l), id(r)), (rank, id(&merged)));
    }
    let mut out = Vec::new();
    for word in PreTokenizer::Gpt2.words(text) {
        // The trainer's ids 0..=255 are the bytes.
        let mut ids: Vec<u32> = word.bytes().map(u32::from).collect();
        loop {
            let best = ids
                .windows(2)
                .enumerate()
                .filter_map(|(i, p)| ranks.get(&(p[0], p[1])).map(|&(rank, new)| (rank, i, new)))
                .min();
            let Some((_, i, new)) = best else { break };
            ids[i] = new;
            ids.remove(i + 1);
        }
        out.extend(ids);
    }
    out
}

#[test]
fn bpe_trainer_round_trips_and_applies_merges_in_rank_order() {
    let corpus = StoryGenerator::new(11).corpus(30_000);
    let config = BpeTrainerConfig {
        vocab_size: 400,
        ..BpeTrainerConfig::default()
    };
    let texts: Vec<&str> = corpus.split("<|endoftext|>").collect();
    let vocab = train_byte_level_bpe(texts.iter().copied(), &config).unwrap();
    assert_eq!(vocab.len(), 400);
    assert_eq!(vocab.merge_count(), 400 - 257);
    assert_eq!(vocab.bos(), Some(399));
    assert_eq!(vocab.eos(), Some(399));
    assert_eq!(vocab.token_str(399), Some("<|endoftext|>"));
    // The first merge is the most frequent pair of the corpus (`e`+` ` never: words
    // start with their space, so it is a within-word pair such as `Ġ t` or `h e`).
    assert!(vocab.token_bytes(256).is_some_and(|t| t.len() >= 2));

    // Through GGUF metadata and back, as a model file carries it.
    let mut md = Metadata::new();
    vocab.write_gguf_metadata(&mut md);
    let loaded = Vocabulary::from_gguf(&md).unwrap();

    let fresh = StoryGenerator::new(12).story();
    for text in [
        fresh.as_str(),
        "Once upon a time, a zebra ate 3 quiet kiwis! Ünïcødé ✓",
    ] {
        let ids = loaded.tokenize(text, TokenizeOptions::PLAIN);
        assert_eq!(ids, vocab.tokenize(text, TokenizeOptions::PLAIN));
        assert_eq!(loaded.detokenize(&ids, Default::default()).unwrap(), text);
        assert_eq!(ids, reference_bpe(&md, &loaded, text), "{text}");
    }
    // Trained text compresses: under half a token per byte.
    let ids = loaded.tokenize(&fresh, TokenizeOptions::PLAIN);
    assert!(
        ids.len() * 2 < fresh.len(),
        "{} tokens for {} bytes",
        ids.len(),
        fresh.len()
    );
    // BOS is added with special tokens.
    assert_eq!(loaded.tokenize("Once", TokenizeOptions::default())[0], 399);
}

#[test]
fn bpe_trainer_rejects_a_vocabulary_too_small_for_the_bytes() {
    let config = BpeTrainerConfig {
        vocab_size: 100,
        ..BpeTrainerConfig::default()
    };
    let err = train_byte_level_bpe(["abc"], &config).unwrap_err();
    assert!(err.to_string().contains("at least 257"), "{err}");
}

#[test]
fn a_short_training_run_lowers_the_loss() {
    let config = TrainConfig {
        shape: DemoShape {
            dim: 32,
            layers: 1,
            heads: 2,
            ffn: 64,
            context: 32,
        },
        vocab_size: 300,
        tokenizer_corpus_bytes: 20_000,
        steps: 12,
        batch: 2,
        seq_len: 24,
        train_tokens: 4_000,
        held_out_tokens: 200,
        peak_lr: 1e-2,
        min_lr: 1e-3,
        warmup_steps: 2,
        seed: 5,
        threads: 1,
        ..TrainConfig::default()
    };
    let mut steps = Vec::new();
    let report = train_demo(&config, &mut |p| {
        if let tempra_llm::demo::Progress::Step(s) = p {
            steps.push(s);
        }
    })
    .unwrap();
    assert_eq!(steps.len(), 12);
    assert!(
        steps
            .iter()
            .all(|s| s.loss.is_finite() && s.tokens_per_second > 0.0)
    );
    assert_eq!(report.tokens_seen, 12 * 2 * 24);
    assert_eq!(report.parameters, config.shape.parameter_count(300));
    let uniform = (300f64).ln();
    assert!(
        (report.first_train_loss - uniform).abs() < 0.5,
        "an untrained model starts near ln(V) = {uniform}: {}",
        report.first_train_loss
    );
    assert!(
        report.final_train_loss < report.first_train_loss - 0.7,
        "loss {} → {}",
        report.first_train_loss,
        report.final_train_loss
    );
    assert!(report.held_out_loss < report.first_train_loss - 0.5);

    // The GGUF loads as a model whose tokenizer comes from its metadata.
    let file =
        tempra_llm::ModelFile::from_gguf_bytes(Arc::new(report.gguf), &Limits::default()).unwrap();
    let model = Model::from_file(
        file,
        &LoadOptions {
            threads: Some(1),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(model.vocab().len(), 300);
    assert_eq!(model.config().embedding_length, 32);
}

fn embedded() -> Option<&'static [u8]> {
    let bytes = embedded_demo_model();
    if bytes.is_none() {
        assert!(
            std::env::var_os("REQUIRE_MODELS").is_none(),
            "REQUIRE_MODELS is set but tempra-llm was built without assets/demo-stories.gguf"
        );
        eprintln!("skipping: built without assets/demo-stories.gguf");
    }
    bytes
}

fn load_embedded(bytes: &'static [u8]) -> Arc<Model> {
    Model::load_static(
        bytes,
        &LoadOptions {
            threads: Some(1),
            ..LoadOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn the_embedded_model_loads_and_continues_a_story_greedily() {
    let Some(bytes) = embedded() else { return };
    let model = load_embedded(bytes);
    assert_eq!(model.config().arch.to_string(), "llama");
    assert!(bytes.len() < 4 << 20, "{} bytes", bytes.len());
    let vocab = model.vocab();
    let prompt = vocab.tokenize("Once upon a time, there was", TokenizeOptions::default());
    let mut session = model.session().unwrap();
    let mut logits = session.prefill(&prompt).unwrap();
    let mut ids = Vec::new();
    for _ in 0..12 {
        let row = logits_slice(&logits).unwrap();
        let next = row
            .iter()
            .enumerate()
            .fold(
                (0, f32::NEG_INFINITY),
                |b, (i, &v)| if v > b.1 { (i, v) } else { b },
            )
            .0 as u32;
        ids.push(next);
        logits = session.step(next).unwrap();
    }
    let text = vocab.detokenize(&ids, Default::default()).unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn the_embedded_model_predicts_fresh_stories() {
    let Some(bytes) = embedded() else { return };
    let model = load_embedded(bytes);
    // Stories from a seed neither training nor its held-out set used.
    let stream =
        TokenStream::generate(&mut StoryGenerator::new(99_991), model.vocab(), 300).unwrap();
    let loss = held_out_loss_of_gguf(bytes, &stream, 128, 1).unwrap();
    assert!(
        loss < EMBEDDED_HELD_OUT_LOSS_BOUND,
        "held-out loss {loss} (bound {EMBEDDED_HELD_OUT_LOSS_BOUND})"
    );
}
