//! The scenarios `cargo xtask leak-check` runs; each appends [`crate::check::Check`]s.

pub mod decode;
pub mod gpu;
pub mod repeated;
pub mod teardown;
pub mod training;
