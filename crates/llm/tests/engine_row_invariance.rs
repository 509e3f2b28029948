//! Issue #28, "same request, same tokens": the logits of a token at a position are
//! bit-identical however the engine got there.
//!
//! For every file type the random model builder writes (F32, F16, BF16, Q8_0, Q4_0,
//! Q4_1, Q5_0, Q5_1 and the Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K mixes) and 1, 2 and 3
//! worker threads, the logits of every position of a random prompt are computed the
//! five ways of `row_invariance/mod.rs` (one-shot prefill, chunked prefill, decode,
//! batched decode beside other sessions, cache reuse).
//!
//! Each way must give the reference's f32 values bit for bit (`to_bits`), and the
//! reference at 2 and 3 threads must be the reference at 1 thread. Every mismatch, per
//! (format, threads, way), is collected and reported together at the end.
//!
//! The model is sized so that the CPU worker pool really splits the work: the float dot
//! products and quantized products split a matrix only when it holds at least two tasks
//! of 64 KiB of weight bytes. With dim 512 and ffn 1536 every feed-forward matrix does in
//! every format, as do the attention matrices in all but the smallest formats and the
//! 2048-row output head in all of them; GQA (8 query heads over 2 KV heads) runs the
//! grouped attention.

mod hf_cases;
mod row_invariance;

use std::sync::Arc;
use std::time::Instant;

use row_invariance::{
    BATCH, Inputs, Lcg, Mismatch, assert_none, check_ways, decode, difference, one_shot,
};
use tempra_llm::ModelFile;
use tempra_llm::engine::{LoadOptions, Model};
use tempra_llm::gguf::Limits;
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

/// The model: see the module docs for why this size.
const SHAPE: &str = "dim=512,layers=2,heads=8,kv_heads=2,ffn=1536,vocab=2048,context=160";
/// Worker threads of each load of the model.
const THREADS: [usize; 3] = [1, 2, 3];

/// Every way at every thread count against the one-shot prefill of its thread count and
/// that against the one-shot prefill at one thread; returns the mismatches.
fn check_format(qtype: QuantType, seed: u64) -> Vec<Mismatch> {
    check_shape(SHAPE, qtype, seed)
}

/// [`check_format`] on a model of `shape` (a [`ModelShape::parse`] text).
fn check_shape(shape: &str, qtype: QuantType, seed: u64) -> Vec<Mismatch> {
    let shape = ModelShape::parse(shape).expect("shape");
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(qtype)
        .with_seed(seed);
    let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
    let inputs = Inputs::new(&mut Lcg(seed), shape.vocab);
    let mut mismatches = Vec::new();
    let mut one_thread: Option<Vec<f32>> = None;
    for threads in THREADS {
        let began = Instant::now();
        let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
        let options = LoadOptions {
            threads: Some(threads),
            batch_sessions: BATCH,
            ..LoadOptions::default()
        };
        let model = Model::from_file(file, &options).expect("load");
        assert_eq!(model.executor().threads(), threads, "{qtype}");
        let reference = one_shot(&model, &inputs);
        match &one_thread {
            None => one_thread = Some(reference.clone()),
            Some(want) => {
                if let Some(difference) = difference(want, &reference, shape.vocab) {
                    mismatches.push(Mismatch {
                        case: format!(
                            "{qtype}, {threads} threads, one-shot prefill against 1 thread"
                        ),
                        difference,
                    });
                }
            }
        }
        let case = format!("{qtype}, {threads} threads");
        check_ways(&model, &inputs, &reference, &case, &mut mismatches);
        eprintln!(
            "{qtype}, {threads} threads: {} tokens in {:.1?}",
            inputs.prompt.len(),
            began.elapsed()
        );
    }
    mismatches
}

#[test]
fn logits_are_bit_identical_however_a_position_is_reached() {
    let mut mismatches = Vec::new();
    for (i, qtype) in QuantType::ALL.into_iter().enumerate() {
        mismatches.extend(check_format(qtype, 28 + i as u64));
    }
    assert_none(&mismatches);
}

/// A mixture of experts keeps the identity: the router's choice and each expert's rows
/// are per token, and the grouped-expert product gives a row the same bits whichever
/// other tokens chose its experts. [`SHAPE`] with 8 experts of width 256, 2 per token,
/// in the float, Q8_0, Q4_0 and K-quant mixes the experts are most often stored in.
#[test]
fn mixtures_of_experts_keep_the_identity() {
    let shape = format!("{SHAPE},experts=8,experts_used=2,expert_ffn=256");
    let mut mismatches = Vec::new();
    for (i, qtype) in [
        QuantType::F32,
        QuantType::Q8_0,
        QuantType::Q4_0,
        QuantType::Q4KM,
    ]
    .into_iter()
    .enumerate()
    {
        mismatches.extend(check_shape(&shape, qtype, 300 + i as u64));
    }
    assert_none(&mismatches);
}

/// `LoadOptions::fast_prefill` reaches the backend: with it, an F16 model's one-shot
/// prefill runs the blocked GEMM and its logits differ from decoding the same tokens one
/// at a time (the identity the default keeps).
#[test]
fn the_fast_prefill_option_gives_up_the_identity() {
    let shape = ModelShape::parse(SHAPE).expect("shape");
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(QuantType::F16)
        .with_seed(7);
    let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
    let inputs = Inputs::new(&mut Lcg(7), shape.vocab);
    let load = |fast_prefill: bool| {
        let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
        let options = LoadOptions {
            threads: Some(2),
            fast_prefill,
            ..LoadOptions::default()
        };
        Model::from_file(file, &options).expect("load")
    };
    let vocab = shape.vocab;
    let fast = load(true);
    assert!(
        difference(&one_shot(&fast, &inputs), &decode(&fast, &inputs), vocab).is_some(),
        "with fast_prefill the one-shot prefill matched decode bit for bit"
    );
    let default = load(false);
    if let Some(difference) = difference(
        &one_shot(&default, &inputs),
        &decode(&default, &inputs),
        vocab,
    ) {
        let case = "F16 by default, decode against one-shot prefill".to_string();
        panic!("{}", Mismatch { case, difference });
    }
}

/// The architectures whose files split fused matrices, skip norms or rope, scale
/// branches or rope, or route tokens to experts ([`hf_cases::NEW_ARCHITECTURE_CASES`]):
/// the five ways on the transformers reference files (`tests/data/hf`), F32 weights, at
/// 1 and 2 threads.
#[test]
fn every_architecture_keeps_the_identity() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf");
    let mut mismatches = Vec::new();
    for (i, name) in hf_cases::NEW_ARCHITECTURE_CASES.into_iter().enumerate() {
        for threads in [1, 2] {
            let options = LoadOptions {
                threads: Some(threads),
                batch_sessions: BATCH,
                context_length: Some(128),
                ..LoadOptions::default()
            };
            let model = Model::load(dir.join(format!("{name}.gguf")), &options).expect("load");
            let inputs = Inputs::new(&mut Lcg(90 + i as u64), model.config().vocab_size);
            let reference = one_shot(&model, &inputs);
            check_ways(
                &model,
                &inputs,
                &reference,
                &format!("{name}, {threads} threads"),
                &mut mismatches,
            );
        }
    }
    assert_none(&mismatches);
}

/// Quantized KV caches keep the identity: each row is quantized on its own as it is
/// written, and attention dequantizes the same blocks whichever tile reads them. An F16
/// model with Q8_0, Q4_0 and mixed caches, the five ways at 1, 2 and 3 threads.
#[test]
fn quantized_kv_caches_keep_the_identity() {
    use tempra_tensor::DType;
    let shape = ModelShape::parse(SHAPE).expect("shape");
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(QuantType::F16)
        .with_seed(41);
    let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
    let inputs = Inputs::new(&mut Lcg(41), shape.vocab);
    let mut mismatches = Vec::new();
    for (keys, values) in [
        (DType::Q8_0, DType::Q8_0),
        (DType::Q4_0, DType::Q4_0),
        (DType::Q8_0, DType::F16),
    ] {
        let mut one_thread: Option<Vec<f32>> = None;
        for threads in THREADS {
            let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
            let options = LoadOptions {
                threads: Some(threads),
                batch_sessions: BATCH,
                kv_type: keys,
                kv_type_v: Some(values),
                ..LoadOptions::default()
            };
            let model = Model::from_file(file, &options).expect("load");
            let reference = one_shot(&model, &inputs);
            let case = format!("kv {}, {threads} threads", model.kv_types());
            if let Some(want) = &one_thread
                && let Some(difference) = difference(want, &reference, shape.vocab)
            {
                let case = format!("{case}, one-shot prefill against 1 thread");
                mismatches.push(Mismatch { case, difference });
            }
            one_thread.get_or_insert(reference.clone());
            check_ways(&model, &inputs, &reference, &case, &mut mismatches);
        }
    }
    assert_none(&mismatches);
}
