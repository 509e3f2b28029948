//! tempra-memory-harness: the measuring half of `cargo xtask leak-check`. The binary
//! installs [`counting_alloc::CountingAlloc`] as its global allocator, runs the
//! [`scenarios`] and prints one JSON line per [`check::Check`]. The libraries never carry
//! the counting allocator; only this harness does. See the README for the scenarios and
//! how the peak-memory bounds are computed.

pub mod block_bound;
pub mod check;
pub mod counting_alloc;
pub mod cpu_engine;
pub mod models;
pub mod process_memory;
pub mod scenarios;
