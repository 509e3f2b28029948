//! The crate README against the code: its weight-format table (the activation partner,
//! the layout `prepare_weight` makes, the prefill path) and its opening example.

use std::sync::Arc;

use tempra_backend_cpu::interleaved::{InterleavedLayout, InterleavedWeight};
use tempra_backend_cpu::{CpuBackend, CpuConfig, Isa};
use tempra_tensor::compare::nmse;
use tempra_tensor::quant::{self, vec_dot_dtype};
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, Result, Tensor};

const README: &str = include_str!("../README.md");

/// One row of the README's weight-format table.
#[derive(Debug)]
struct Row {
    format: DType,
    activations: DType,
    layout: Option<InterleavedLayout>,
    integer_prefill: bool,
}

/// The dtype whose `name()` is `name`.
fn dtype_named(name: &str) -> DType {
    DType::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .unwrap_or_else(|| panic!("the README names no dtype {name:?}"))
}

/// The interleaved layout whose `name()` is `name`.
fn layout_named(name: &str) -> InterleavedLayout {
    InterleavedLayout::ALL
        .into_iter()
        .find(|l| l.name() == name)
        .unwrap_or_else(|| panic!("the README names no layout {name:?}"))
}

/// The rows of the table under the `| weight format |` header.
fn format_table() -> Vec<Row> {
    let mut lines = README
        .lines()
        .skip_while(|l| !l.starts_with("| weight format |"));
    assert!(
        lines.next().is_some(),
        "no weight-format table in the README"
    );
    lines.next(); // |---|---|
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line
                .split('|')
                .map(|c| c.trim().trim_matches('`'))
                .collect();
            assert_eq!(cells.len(), 6, "{line}");
            Row {
                format: dtype_named(cells[1]),
                activations: dtype_named(cells[2]),
                layout: match cells[3] {
                    "—" => None,
                    name => Some(layout_named(name)),
                },
                integer_prefill: match cells[4] {
                    "integer" => true,
                    "dequantized" => false,
                    other => panic!("prefill {other:?}: integer or dequantized"),
                },
            }
        })
        .collect()
}

/// The block formats weights come in: every block dtype but the activation-only Q8_1
/// and Q8_K.
fn weight_formats() -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|d| d.is_quantized())
        .filter(|d| !matches!(d, DType::Q8_1 | DType::Q8K))
        .collect()
}

#[test]
fn the_table_lists_every_weight_format_once() {
    let listed: Vec<DType> = format_table().iter().map(|r| r.format).collect();
    assert_eq!(listed, weight_formats());
}

#[test]
fn the_table_matches_the_dtypes() {
    for row in format_table() {
        let f = row.format;
        assert_eq!(row.activations, vec_dot_dtype(f), "{f}: activations");
        assert_eq!(
            row.layout,
            InterleavedLayout::of(f),
            "{f}: InterleavedLayout::of"
        );
        if let Some(layout) = row.layout {
            assert_eq!(layout.format(), f, "{layout}: format");
        }
    }
}

/// A CPU context per ISA this CPU runs, one thread each (row-invariant by default).
fn cpus() -> Vec<(Isa, ExecContext)> {
    cpus_with(false)
}

/// [`cpus`] with `CpuConfig::fast_prefill` as given.
fn cpus_with(fast_prefill: bool) -> Vec<(Isa, ExecContext)> {
    Isa::available()
        .into_iter()
        .map(|isa| {
            let config = CpuConfig {
                isa: Some(isa),
                threads: Some(1),
                fast_prefill,
            };
            let backend = CpuBackend::with_config(HostPool::host(), config).expect("available");
            (isa, ExecContext::new(Arc::new(backend)))
        })
        .collect()
}

const N: usize = 16;
const K: usize = 256;

/// The same `[N, K]` weight of `format` (random blocks for the formats without a
/// quantizer) and `[rows, K]` input in `ctx`.
fn operands(ctx: &ExecContext, format: DType, rows: usize) -> Result<(Tensor, Tensor)> {
    let w = if quant::has_quantizer(format) {
        ctx.quantize(&ctx.randn(&[N, K], DType::F32, 0.0, 1.0, 11)?, format)?
    } else {
        let blocks = quant::random_blocks(format, N * K / format.block_len(), 1.0, 11)?;
        ctx.from_bytes(&blocks, &[N, K], format)?
    };
    let x = ctx.randn(&[rows, K], DType::F32, 0.0, 1.0, 12)?;
    Ok((w, x))
}

#[test]
fn prepare_weight_makes_the_tables_layouts() -> Result<()> {
    for (isa, ctx) in cpus() {
        for row in format_table() {
            let (w, _) = operands(&ctx, row.format, 1)?;
            let prepared = ctx.prepare_weight(&w)?;
            if let Some(p) = &prepared {
                assert_eq!(p.dtype(), row.format, "{isa}: the dtype stays the file's");
            }
            let layout = prepared
                .as_ref()
                .and_then(|p| Some(InterleavedWeight::of(p)?.layout()));
            // The portable kernels read the row-major blocks: nothing is prepared there.
            let want = if isa == Isa::Scalar { None } else { row.layout };
            assert_eq!(layout, want, "{isa} {}", row.format);
        }
    }
    Ok(())
}

/// Whether `linear` over `rows` input rows ran integer products: their error against the
/// reference is that of the 8-bit activations (an NMSE near 1e-5), while a dequantized
/// f32 GEMM agrees to f32 rounding (near 1e-14).
fn runs_integer(ctx: &ExecContext, format: DType, rows: usize, prepare: bool) -> Result<bool> {
    let reference = ExecContext::reference();
    let (w, x) = operands(ctx, format, rows)?;
    let w = if prepare {
        ctx.prepare_weight(&w)?.unwrap_or(w)
    } else {
        w
    };
    let (rw, rx) = operands(&reference, format, rows)?;
    let err = nmse(
        &ctx.linear(&x, &w, None)?,
        &reference.linear(&rx, &rw, None)?,
    )?;
    assert!(
        !(1e-10..=1e-8).contains(&err),
        "{format} ({} as given to linear), {rows} rows: NMSE {err:e} is neither path's",
        w.storage().kind()
    );
    Ok(err > 1e-8)
}

#[test]
fn linear_takes_the_tables_paths() -> Result<()> {
    // Row-invariant (the default): integer products at every row count, both layouts.
    for (isa, ctx) in cpus() {
        for row in format_table() {
            let f = row.format;
            for prepared in [false, true] {
                for rows in [1, 40] {
                    assert!(
                        runs_integer(&ctx, f, rows, prepared)?,
                        "{isa} {f}: {rows} rows, prepared={prepared}"
                    );
                }
            }
        }
    }
    // With a fast prefill, the table's last column.
    for (isa, ctx) in cpus_with(true) {
        for row in format_table() {
            let f = row.format;
            // Decode and short batches: integer products with quantized activations.
            assert!(runs_integer(&ctx, f, 1, true)?, "{isa} {f}: one row");
            // From 32 rows on, the row-major layouts dequantize while packing.
            assert!(
                !runs_integer(&ctx, f, 40, false)?,
                "{isa} {f}: 40 rows, row-major"
            );
            // The prepared layouts run what the table's last column says.
            if isa != Isa::Scalar {
                let integer = runs_integer(&ctx, f, 40, true)?;
                assert_eq!(integer, row.integer_prefill, "{isa} {f}: 40 rows, prepared");
            }
        }
    }
    Ok(())
}

/// The README's example, line for line (`readme_example_is_this_code` keeps them equal).
mod example {
    use std::sync::Arc;
    use tempra_backend_cpu::CpuBackend;
    use tempra_tensor::{DType, ExecContext, TensorError, tempra_pool::HostPool};

    pub(crate) fn main() -> Result<(), TensorError> {
        let ctx = ExecContext::new(Arc::new(CpuBackend::new(HostPool::host())));
        let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
        let y = ctx.matmul(&a, &a.t()?)?; // the transposed view is packed, not copied
        assert_eq!(y.to_vec_f32()?, [5.0, 11.0, 11.0, 25.0]);
        let w = ctx.quantize(&ctx.randn(&[64, 256], DType::F32, 0.0, 1.0, 7)?, DType::Q4K)?;
        let w = ctx.prepare_weight(&w)?.unwrap_or(w); // q4_K_r8 from AVX2 up, else kept
        let x = ctx.randn(&[1, 256], DType::F32, 0.0, 1.0, 8)?;
        assert_eq!(ctx.linear(&x, &w, None)?.dims(), &[1, 64]); // Q8_K activations, int8 dots
        Ok(())
    }
}

#[test]
fn readme_example_runs() -> Result<()> {
    example::main()
}

#[test]
fn readme_example_is_this_code() {
    let this = include_str!("readme_tables.rs");
    let block = README
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a rust block in the README");
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            this.contains(line),
            "README example line not in the test: {line}"
        );
    }
}
