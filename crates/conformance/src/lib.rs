//! tempra-conformance: one suite every backend runs, as ggml's `test-backend-ops` does.
//!
//! - [`cases::all`]: one list of ops and shapes: every `Backend` op, odd and round sizes,
//!   broadcast and strided views, each float and GGUF block format an op takes, the
//!   engines' decode and prefill shapes.
//! - One metric, [`tempra_tensor::compare::nmse`], against one oracle: the reference
//!   backend on the inputs widened to f64 ([`runner::oracle`]).
//! - One budget table, [`Precision::budget`], keyed by the kind of arithmetic and the
//!   format, the same for every backend.
//! - The calls a backend hands to another implementation (the CPU's delegations to the
//!   reference kernels, the GPU's host fallbacks) counted per case through
//!   [`tempra_tensor::Backend::handoffs`] and reported alike.
//!
//! ```
//! use tempra_conformance::{backends, cases, run_suite};
//!
//! let cases = cases::all()?;
//! let target = backends::cpu(None, 2)?;
//! let report = run_suite(&target.ctx, target.label, &cases)?;
//! assert!(report.failures().is_empty(), "{report}");
//! # Ok::<(), tempra_conformance::ConformanceError>(())
//! ```
//!
//! The `tempra-conformance` binary runs it from the command line
//! (`--backend reference|cpu|gpu`, the last with the `gpu` feature).

pub mod backends;
pub mod budget;
pub mod case;
pub mod cases;
pub mod error;
pub mod report;
pub mod runner;

pub use budget::Precision;
pub use case::Case;
pub use error::{ConformanceError, Result};
pub use report::{Outcome, Report, Row};
pub use runner::run_suite;
