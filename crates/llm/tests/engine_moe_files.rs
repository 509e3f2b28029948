//! A mixture-of-experts file that does not hold together is refused at load with an
//! error naming the tensor or key at fault, never a panic: an expert count the stacks do
//! not have, a missing expert tensor, a misshapen one, more experts used than exist, a
//! missing `expert_used_count`, a shared expert without its down projection. The files
//! are the random builder's Mixtral-form model (`ModelShape::TINY_MOE`) with one thing
//! changed; a file left as it is loads and runs. gpt-oss files (the transformers
//! reference case's layout) are also refused for a missing or misshapen expert bias and
//! for sinks of the wrong shape or dtype.

use std::sync::Arc;

use tempra_llm::ModelFile;
use tempra_llm::engine::{LoadOptions, Model};
use tempra_llm::gguf::{GgufWriter, Limits, Metadata, TensorSpec, keys};
use tempra_llm::testing::{ModelShape, RandomModelSpec};
use tempra_tensor::{DType, Shape};

/// The tiny MoE's metadata and tensor list, all F32.
fn parts() -> (Metadata, Vec<TensorSpec>) {
    let spec = RandomModelSpec::llama(ModelShape::TINY_MOE);
    (spec.metadata().unwrap(), spec.f32_tensors().unwrap())
}

/// A GGUF of `metadata` and `tensors` (F32 or F16), every value 0.01 (enough to load and
/// run).
fn file(metadata: &Metadata, tensors: Vec<TensorSpec>) -> ModelFile {
    let mut writer = GgufWriter::new(Vec::new(), metadata, tensors.clone()).unwrap();
    for t in &tensors {
        let bytes: Vec<u8> = match t.dtype {
            DType::F16 => {
                std::iter::repeat_n(half::f16::from_f32(0.01).to_le_bytes(), t.elem_count())
                    .flatten()
                    .collect()
            }
            _ => std::iter::repeat_n(0.01f32.to_le_bytes(), t.elem_count())
                .flatten()
                .collect(),
        };
        writer.write_data(&bytes).unwrap();
    }
    let bytes = writer.finish().unwrap();
    ModelFile::from_gguf_bytes(Arc::new(bytes), &Limits::default()).unwrap()
}

/// The load error of `file`'s model, as text.
fn load_error(file: ModelFile) -> String {
    match Model::from_file(file, &LoadOptions::default()) {
        Ok(_) => panic!("the broken file loaded"),
        Err(e) => e.to_string(),
    }
}

fn llama_key(suffix: &str) -> String {
    keys::arch_key("llama", suffix)
}

/// `tensors` with the one named `name` reshaped to `dims`.
fn reshaped(mut tensors: Vec<TensorSpec>, name: &str, dims: &[usize]) -> Vec<TensorSpec> {
    let t = tensors.iter_mut().find(|t| t.name == name).expect(name);
    t.shape = Shape::new(dims).unwrap();
    tensors
}

#[test]
fn the_unchanged_file_loads_and_runs() {
    let (metadata, tensors) = parts();
    let model = Model::from_file(file(&metadata, tensors), &LoadOptions::default()).unwrap();
    let moe = model.config().moe.expect("a mixture of experts");
    assert_eq!((moe.expert_count, moe.experts_used), (8, 2));
    let mut session = model.session().unwrap();
    let logits = session.prefill(&[1, 2, 3]).unwrap();
    assert_eq!(logits.dims(), [ModelShape::TINY_MOE.vocab]);
}

#[test]
fn an_expert_count_the_stacks_do_not_have_is_refused() {
    let (mut metadata, tensors) = parts();
    metadata.set(llama_key(keys::EXPERT_COUNT), 6u32);
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("blk.0.ffn_gate_inp.weight"), "{e}");
}

#[test]
fn a_missing_expert_tensor_is_refused_by_name() {
    let (metadata, mut tensors) = parts();
    tensors.retain(|t| t.name != "blk.1.ffn_down_exps.weight");
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("blk.1.ffn_down_exps.weight"), "{e}");
}

#[test]
fn a_misshapen_expert_stack_is_refused_by_name() {
    let (metadata, tensors) = parts();
    let (d, f) = (ModelShape::TINY_MOE.dim, ModelShape::TINY_MOE.expert_ffn);
    let tensors = reshaped(tensors, "blk.0.ffn_up_exps.weight", &[8, f / 2, d]);
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("blk.0.ffn_up_exps.weight"), "{e}");
    let (metadata, tensors) = parts();
    let tensors = reshaped(tensors, "blk.1.ffn_gate_exps.weight", &[f, d]);
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("blk.1.ffn_gate_exps.weight"), "{e}");
}

#[test]
fn more_experts_used_than_exist_is_refused() {
    let (mut metadata, tensors) = parts();
    metadata.set(llama_key(keys::EXPERT_USED_COUNT), 9u32);
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("llama.expert_used_count"), "{e}");
}

#[test]
fn a_missing_expert_used_count_is_refused() {
    let (mut metadata, tensors) = parts();
    metadata.remove(&llama_key(keys::EXPERT_USED_COUNT));
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("llama.expert_used_count"), "{e}");
}

#[test]
fn a_shared_expert_without_its_down_projection_is_refused() {
    let (mut metadata, mut tensors) = parts();
    let d = ModelShape::TINY_MOE.dim;
    metadata.set(llama_key(keys::EXPERT_SHARED_FEED_FORWARD_LENGTH), 64u32);
    for name in ["ffn_gate_shexp", "ffn_up_shexp"] {
        let spec = TensorSpec::new(
            format!("blk.0.{name}.weight"),
            Shape::new(&[64, d]).unwrap(),
            DType::F32,
        );
        tensors.push(spec);
    }
    let e = load_error(file(&metadata, tensors));
    assert!(e.contains("blk.0.ffn_down_shexp.weight"), "{e}");
}

/// The metadata and tensor list (all F32) of the gpt-oss reference case
/// (`tests/data/hf/gpt-oss.gguf`): sinks, attention and expert biases.
fn gpt_oss_parts() -> (Metadata, Vec<TensorSpec>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf/gpt-oss.gguf");
    let source = ModelFile::open(path).unwrap();
    let tensors = source
        .tensor_infos()
        .iter()
        .map(|info| TensorSpec::new(info.name(), info.spec.shape, DType::F32))
        .collect();
    (source.metadata().clone(), tensors)
}

#[test]
fn gpt_oss_files_missing_a_bias_or_with_bad_sinks_are_refused_by_name() {
    let (metadata, tensors) = gpt_oss_parts();
    let model = Model::from_file(file(&metadata, tensors.clone()), &LoadOptions::default());
    let mut session = model.unwrap().session().unwrap();
    assert_eq!(session.prefill(&[1, 2, 3]).unwrap().dims(), [320]);
    // The router has a bias: every expert stack must have one.
    let mut missing = tensors.clone();
    missing.retain(|t| t.name != "blk.1.ffn_up_exps.bias");
    let e = load_error(file(&metadata, missing));
    assert!(e.contains("blk.1.ffn_up_exps.bias"), "{e}");
    let e = load_error(file(
        &metadata,
        reshaped(tensors.clone(), "blk.0.ffn_down_exps.bias", &[8, 32]),
    ));
    assert!(e.contains("blk.0.ffn_down_exps.bias"), "{e}");
    // One sink per query head (4), in f32.
    let e = load_error(file(
        &metadata,
        reshaped(tensors.clone(), "blk.0.attn_sinks.weight", &[3]),
    ));
    assert!(e.contains("blk.0.attn_sinks.weight"), "{e}");
    let mut f16_sinks = tensors;
    let sinks = f16_sinks
        .iter_mut()
        .find(|t| t.name == "blk.1.attn_sinks.weight")
        .unwrap();
    sinks.dtype = DType::F16;
    let e = load_error(file(&metadata, f16_sinks));
    assert!(
        e.contains("blk.1.attn_sinks.weight") && e.contains("f32"),
        "{e}"
    );
}
