//! What `Var` costs an inference forward: the tiny transformer's forward in plain facade
//! calls and through `Var` constants, timed interleaved (A, B, A, B, ...) so machine
//! load hits both alike, reporting the minimum and median of each.
//!
//! `cargo run --release -p tempra-autograd --example forward_overhead [reps]`
//!
//! With `plain N` or `var N` it runs only that forward N times (`adds-plain N`/`adds-var
//! N`: 64 adds on 8 floats, where the wrapper's own cost shows), for an instruction count
//! that no load can disturb:
//! `valgrind --tool=cachegrind --cache-sim=no target/release/examples/forward_overhead var 20`

#![allow(missing_docs)]

#[path = "../tests/common/tiny_transformer.rs"]
mod tiny_transformer;

use std::hint::black_box;
use std::time::{Duration, Instant};

use tempra_autograd::{Autograd, ParamStore, Result, Var};
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

fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2])
}

fn main() -> Result<()> {
    let ctx = ExecContext::reference();
    let ag = Autograd::new(ctx.clone());
    let mut params = ParamStore::new();
    let model = TinyTransformer::new(&ctx, CFG, &mut params, 1)?;
    let mut frozen = ParamStore::new();
    for (_, name, var) in params.iter() {
        frozen.add_frozen(name, var.tensor().clone())?;
    }
    let toks: Vec<u32> = (0..T as u32)
        .map(|i| (i * 7 + 3) % CFG.vocab as u32)
        .collect();
    let ids = ctx.from_slice(&toks, &[T])?;
    let positions = ctx.arange(0.0, T as f64, 1.0, DType::U32)?;
    let plain = || -> Result<()> {
        black_box(model.forward_plain(&ctx, &frozen, &ids, &positions)?);
        Ok(())
    };
    let var = || -> Result<()> {
        black_box(model.forward(&ag, &frozen, &ids, &positions)?);
        Ok(())
    };
    // 64 adds on [8]: the kernel is nearly free, so the wrapper's own cost shows.
    let a = ctx.randn(&[8], DType::F32, 0.0, 1.0, 3)?;
    let va = Var::constant(a.clone());
    let adds_plain = || -> Result<()> {
        let mut x = a.clone();
        for _ in 0..64 {
            x = ctx.add(&x, &a)?;
        }
        black_box(x);
        Ok(())
    };
    let adds_var = || -> Result<()> {
        let mut x = va.clone();
        for _ in 0..64 {
            x = ag.add(&x, &va)?;
        }
        black_box(x);
        Ok(())
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count =
        |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("plain") => (0..count(1, 20)).try_for_each(|_| plain()),
        Some("var") => (0..count(1, 20)).try_for_each(|_| var()),
        Some("adds-plain") => (0..count(1, 1000)).try_for_each(|_| adds_plain()),
        Some("adds-var") => (0..count(1, 1000)).try_for_each(|_| adds_var()),
        _ => {
            let reps = count(0, 100);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            plain()?;
            var()?;
            for _ in 0..reps {
                let t = Instant::now();
                plain()?;
                a.push(t.elapsed());
                let t = Instant::now();
                var()?;
                b.push(t.elapsed());
            }
            let ((amin, amed), (bmin, bmed)) = (stats(a), stats(b));
            let pct = |x: Duration, y: Duration| 100.0 * (y.as_secs_f64() / x.as_secs_f64() - 1.0);
            println!("forward, {reps} interleaved reps (min / median):");
            println!("  plain facade   {amin:>10.3?} / {amed:>10.3?}");
            println!("  Var constants  {bmin:>10.3?} / {bmed:>10.3?}");
            println!(
                "  Var overhead   {:+.2}% / {:+.2}%",
                pct(amin, bmin),
                pct(amed, bmed)
            );
            Ok(())
        }
    }
}
