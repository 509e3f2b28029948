//! Training-step time of the tiny transformer, and its inference forward through `Var`
//! (constants, and variables under `no_grad`) against the same forward in plain facade
//! calls, plus the wrapper's per-op cost on an op whose kernel is nearly free. Run:
//! `cargo bench -p tempra-autograd --bench tiny_transformer`.

#![allow(missing_docs)]

#[path = "../tests/common/tiny_transformer.rs"]
mod tiny_transformer;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tempra_autograd::optim::{AdamW, AdamWConfig, Optimizer};
use tempra_autograd::{Autograd, ParamStore, Var, no_grad};
use tempra_tensor::{DType, ExecContext};
use tiny_transformer::{TinyConfig, TinyTransformer};

const CFG: TinyConfig = TinyConfig {
    vocab: 64,
    dim: 64,
    heads: 4,
    kv_heads: 2,
    ffn: 128,
    layers: 2,
};
const T: usize = 32;

fn tokens() -> Vec<u32> {
    (0..=T as u32)
        .map(|i| (i * 7 + 3) % CFG.vocab as u32)
        .collect()
}

fn bench(c: &mut Criterion) {
    let ctx = ExecContext::reference();
    let ag = Autograd::new(ctx.clone());
    let mut params = ParamStore::new();
    let model = TinyTransformer::new(&ctx, CFG, &mut params, 1).expect("model");
    // The same values as frozen constants (same insertion order, so the same ids).
    let mut frozen = ParamStore::new();
    for (_, name, var) in params.iter() {
        frozen
            .add_frozen(name, var.tensor().clone())
            .expect("frozen copy");
    }
    let toks = tokens();
    let ids = ctx.from_slice(&toks[..T], &[T]).expect("ids");
    let positions = ctx
        .arange(0.0, T as f64, 1.0, DType::U32)
        .expect("positions");

    let mut group = c.benchmark_group("tiny_transformer_forward");
    group.bench_function("plain_facade", |b| {
        b.iter(|| {
            black_box(
                model
                    .forward_plain(&ctx, &frozen, &ids, &positions)
                    .expect("forward"),
            )
        })
    });
    group.bench_function("var_constants", |b| {
        b.iter(|| {
            black_box(
                model
                    .forward(&ag, &frozen, &ids, &positions)
                    .expect("forward"),
            )
        })
    });
    group.bench_function("var_no_grad", |b| {
        b.iter(|| {
            let _guard = no_grad();
            black_box(
                model
                    .forward(&ag, &params, &ids, &positions)
                    .expect("forward"),
            )
        })
    });
    group.finish();
    drop(frozen);

    // The wrapper's own cost per op, where the kernel is nearly free: 64 adds on [8].
    let a = ctx.randn(&[8], DType::F32, 0.0, 1.0, 3).expect("a");
    let (va, vb) = (Var::constant(a.clone()), Var::constant(a.clone()));
    let mut group = c.benchmark_group("op_overhead_64_adds");
    group.bench_function("plain_facade", |b| {
        b.iter(|| {
            let mut x = a.clone();
            for _ in 0..64 {
                x = ctx.add(&x, &a).expect("add");
            }
            black_box(x)
        })
    });
    group.bench_function("var_constants", |b| {
        b.iter(|| {
            let mut x = va.clone();
            for _ in 0..64 {
                x = ag.add(&x, &vb).expect("add");
            }
            black_box(x)
        })
    });
    group.finish();

    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    })
    .expect("adamw");
    c.bench_function("tiny_transformer_train_step", |b| {
        b.iter(|| {
            let grads = {
                let loss = model.loss(&ag, &params, &toks).expect("loss");
                ag.backward(&loss).expect("backward")
            };
            opt.step(&ctx, &mut params, &grads).expect("step")
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
