//! Greedy generation on the real stories260K model is token-for-token what llama2.c's
//! `run.c` produced (`greedy.json` in the shared models folder).

use std::sync::Arc;

use tempra_llm::engine::{BackendKind, LoadOptions, Model, logits_slice};
use tempra_llm::testing::shared_file;
use tempra_tensor::DType;

fn load(backend: BackendKind, kv_type: DType) -> Option<Arc<Model>> {
    let ckpt = shared_file("models/stories260K/stories260K.bin")?;
    let tok = shared_file("models/stories260K/tok512.bin")?;
    let options = LoadOptions {
        tokenizer: Some(tok),
        kv_type,
        backend,
        threads: Some(2),
        ..LoadOptions::default()
    };
    Some(Model::load(ckpt, &options).expect("stories260K loads"))
}

/// (prompt ids, next ids) of every case in greedy.json.
fn cases() -> Option<Vec<(Vec<u32>, Vec<u32>)>> {
    let path = shared_file("models/stories260K/greedy.json")?;
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let ids = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    Some(
        json["cases"]
            .as_array()?
            .iter()
            .map(|c| (ids(&c["prompt_ids"]), ids(&c["next_ids"])))
            .collect(),
    )
}

/// Feeds `prompt`, then greedily decodes, returning the token after every position like
/// run.c's `next_ids`: the forced prompt token inside the prompt, the argmax after it.
fn greedy_next_ids(model: &Arc<Model>, prompt: &[u32], total: usize) -> Vec<u32> {
    let mut session = model.session().unwrap();
    let mut out = Vec::with_capacity(total);
    let argmax = |logits: &[f32]| {
        logits
            .iter()
            .enumerate()
            .fold(
                (0, f32::NEG_INFINITY),
                |b, (i, &v)| if v > b.1 { (i, v) } else { b },
            )
            .0 as u32
    };
    // The prompt one token at a time, as run.c does.
    let mut logits = session.step(prompt[0]).unwrap();
    for &id in &prompt[1..] {
        out.push(id);
        logits = session.step(id).unwrap();
    }
    while out.len() < total {
        let next = argmax(logits_slice(&logits).unwrap());
        out.push(next);
        if out.len() == total {
            break;
        }
        logits = session.step(next).unwrap();
    }
    out
}

#[test]
fn greedy_matches_llama2c_run_c() {
    let (Some(model), Some(cases)) = (load(BackendKind::Cpu, DType::F32), cases()) else {
        return;
    };
    for (prompt, expected) in cases {
        let got = greedy_next_ids(&model, &prompt, expected.len());
        assert_eq!(got, expected, "prompt {prompt:?}");
    }
}

#[test]
fn prefill_batch_equals_token_by_token_and_f16_cache_agrees() {
    let Some(model) = load(BackendKind::Cpu, DType::F16) else {
        return;
    };
    let Some(cases) = cases() else { return };
    let (prompt, expected) = &cases[0];
    let mut session = model.session().unwrap();
    let logits = session.prefill(prompt).unwrap();
    let values = logits_slice(&logits).unwrap();
    let top = values
        .iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &v)| if v > b.1 { (i, v) } else { b },
        )
        .0;
    assert_eq!(top as u32, expected[prompt.len() - 1]);
    // Reset reuses the cache; the same prompt gives the same logits.
    drop(logits);
    session.reset();
    let again = session.prefill(prompt).unwrap();
    let again_top = logits_slice(&again)
        .unwrap()
        .iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &v)| if v > b.1 { (i, v) } else { b },
        )
        .0;
    assert_eq!(again_top, top);
}

#[test]
fn reference_backend_gives_the_same_tokens() {
    let (Some(model), Some(cases)) = (load(BackendKind::Reference, DType::F32), cases()) else {
        return;
    };
    let (prompt, expected) = &cases[0];
    let got = greedy_next_ids(&model, prompt, 24);
    assert_eq!(got, expected[..24]);
}
