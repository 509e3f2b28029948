#![doc = include_str!("../README.md")]

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
