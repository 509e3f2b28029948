//! Attention: causal prefill and decode shapes, grouped KV heads, f16 and block-quantized
//! caches (keys and values in one format or two), a sliding window, a logit soft-cap,
//! keys read through a narrowed cache view, large head dims, attention sinks;
//! bidirectional (encoders).

use tempra_tensor::{AttentionParams, DType, Tensor};

use crate::budget::Precision;
use crate::case::{Case, Inputs};
use crate::error::Result;

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0xA77);
    // (label, tq, tk, hq, hkv, d, kv dtype, q_start, window, softcap)
    type Shape = (
        &'static str,
        usize,
        usize,
        usize,
        usize,
        usize,
        DType,
        usize,
        Option<usize>,
        Option<f32>,
    );
    let shapes: [Shape; 13] = [
        (
            "prefill 7 tokens, 4 heads over 2",
            7,
            7,
            4,
            2,
            16,
            DType::F32,
            0,
            None,
            None,
        ),
        (
            "decode at 32, 4 heads over 2",
            1,
            33,
            4,
            2,
            16,
            DType::F32,
            32,
            None,
            None,
        ),
        (
            "decode f16 cache",
            1,
            33,
            4,
            1,
            64,
            DType::F16,
            32,
            None,
            None,
        ),
        (
            "prefill f16 cache, chunk at 9",
            5,
            14,
            2,
            2,
            32,
            DType::F16,
            9,
            None,
            None,
        ),
        (
            "prefill 70 tokens (blocked kernel)",
            70,
            70,
            2,
            1,
            64,
            DType::F32,
            0,
            None,
            None,
        ),
        ("window 4", 6, 6, 2, 2, 16, DType::F32, 0, Some(4), None),
        (
            "decode window 8 of 40",
            1,
            40,
            2,
            1,
            16,
            DType::F32,
            39,
            Some(8),
            None,
        ),
        ("soft-cap 5", 6, 6, 2, 1, 32, DType::F32, 0, None, Some(5.0)),
        (
            "decode q8_0 cache over two key blocks",
            1,
            70,
            4,
            2,
            32,
            DType::Q8_0,
            69,
            None,
            None,
        ),
        (
            "prefill q4_0 cache, chunk at 9",
            5,
            14,
            2,
            2,
            64,
            DType::Q4_0,
            9,
            None,
            None,
        ),
        (
            "prefill 70 tokens q8_0 cache, 8 heads over 2",
            70,
            70,
            8,
            2,
            32,
            DType::Q8_0,
            0,
            None,
            None,
        ),
        (
            "decode q5_0 cache window 8",
            1,
            40,
            2,
            1,
            32,
            DType::Q5_0,
            39,
            Some(8),
            None,
        ),
        (
            "head dim 128, 8 over 8",
            3,
            3,
            8,
            8,
            128,
            DType::F32,
            0,
            None,
            None,
        ),
    ];
    for (label, tq, tk, hq, hkv, d, kv, q_start, window, softcap) in shapes {
        let q = inputs.normal(&[tq, hq, d])?;
        let k = inputs.normal_as(&[tk, hkv, d], kv)?;
        let v = inputs.normal_as(&[tk, hkv, d], kv)?;
        let params = AttentionParams {
            window,
            softcap,
            ..AttentionParams::causal(d, q_start)
        };
        cases.push(whole(label, [q, k, v], params));
    }
    // The engines' read of a session cache: the first `tk` rows of a longer buffer.
    let q = inputs.normal(&[2, 4, 16])?;
    let k = inputs.normal_as(&[64, 2, 16], DType::F16)?;
    let v = inputs.normal_as(&[64, 2, 16], DType::F16)?;
    cases.push(Case::new(
        "attention",
        "cache narrowed to 11 of 64 rows",
        Precision::Accumulated,
        vec![q, k, v],
        |c, i| {
            let params = AttentionParams::causal(16, 9);
            Ok(vec![c.attention(
                &i[0],
                &i[1].narrow(0, 0, 11)?,
                &i[2].narrow(0, 0, 11)?,
                &params,
            )?])
        },
    ));
    // Keys and values in different formats (`--kv-type-k q8_0 --kv-type-v f16`), read
    // through a narrowed cache.
    let q = inputs.normal(&[3, 4, 32])?;
    let k = inputs.normal_as(&[80, 2, 32], DType::Q8_0)?;
    let v = inputs.normal_as(&[80, 2, 32], DType::F16)?;
    cases.push(Case::new(
        "attention",
        "q8_0 keys, f16 values, cache narrowed to 67 of 80 rows",
        Precision::Accumulated,
        vec![q, k, v],
        |c, i| {
            let params = AttentionParams::causal(32, 64);
            Ok(vec![c.attention(
                &i[0],
                &i[1].narrow(0, 0, 67)?,
                &i[2].narrow(0, 0, 67)?,
                &params,
            )?])
        },
    ));
    // An encoder's attention: every query sees every key (BERT), small and blocked.
    for (label, t, hq, hkv, d) in [
        ("bidirectional 9 tokens, 4 heads over 2", 9, 4, 2, 16),
        ("bidirectional 70 tokens (blocked kernel)", 70, 2, 2, 32),
    ] {
        let q = inputs.normal(&[t, hq, d])?;
        let k = inputs.normal(&[t, hkv, d])?;
        let v = inputs.normal(&[t, hkv, d])?;
        cases.push(whole(label, [q, k, v], AttentionParams::bidirectional(d)));
    }
    // Attention sinks (gpt-oss): one logit per query head that joins each row's softmax
    // with no value. The sinks stay host tensors, as a model keeps them (the GPU reads
    // them into its parameter block). Decode, a window, the blocked prefill kernel and
    // a cache narrowed to fewer rows; sinks up to ±4 make some heads give most of
    // their weight to the sink.
    for (label, tq, tk, hq, hkv, d, q_start, window) in [
        (
            "sinks, decode at 32, 4 heads over 2",
            1,
            33,
            4,
            2,
            16,
            32,
            None,
        ),
        (
            "sinks, prefill window 4, 8 heads over 2",
            6,
            6,
            8,
            2,
            16,
            0,
            Some(4),
        ),
        (
            "sinks, prefill 70 tokens (blocked kernel)",
            70,
            70,
            4,
            1,
            32,
            0,
            None,
        ),
    ] {
        let q = inputs.normal(&[tq, hq, d])?;
        let k = inputs.normal(&[tk, hkv, d])?;
        let v = inputs.normal(&[tk, hkv, d])?;
        let sinks = inputs.uniform(&[hq], -4.0, 4.0)?;
        let params = AttentionParams {
            window,
            ..AttentionParams::causal(d, q_start)
        };
        cases.push(Case::new(
            "attention",
            label,
            Precision::Accumulated,
            vec![q, k, v],
            move |c, i| {
                Ok(vec![c.attention_with_sinks(
                    &i[0],
                    &i[1],
                    &i[2],
                    Some(&sinks),
                    &params,
                )?])
            },
        ));
    }
    // Batched sequences.
    let q = inputs.normal(&[2, 3, 2, 16])?;
    let k = inputs.normal(&[2, 3, 2, 16])?;
    let v = inputs.normal(&[2, 3, 2, 16])?;
    cases.push(Case::new(
        "attention",
        "batch of 2 sequences",
        Precision::Accumulated,
        vec![q, k, v],
        |c, i| {
            Ok(vec![c.attention(
                &i[0],
                &i[1],
                &i[2],
                &AttentionParams::causal(16, 0),
            )?])
        },
    ));
    Ok(())
}

/// The attention of whole `q`, `k`, `v` with `params`.
fn whole(label: &'static str, [q, k, v]: [Tensor; 3], params: AttentionParams) -> Case {
    Case::new(
        "attention",
        label,
        Precision::Accumulated,
        vec![q, k, v],
        move |c, i| Ok(vec![c.attention(&i[0], &i[1], &i[2], &params)?]),
    )
}
