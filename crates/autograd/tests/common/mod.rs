//! Test support shared by the integration tests and the benchmark.

pub mod tiny_transformer;
