//! GPU backend tests: every op against the reference backend on random data (odd sizes,
//! strided and broadcast views), the device pool's reuse rule and trimming, windowed
//! bindings and 2-D dispatch.
//!
//! Without an adapter each test prints why and returns; with `REQUIRE_GPU=1` a missing
//! adapter fails them. CI runs them on Mesa's lavapipe (`VK_ICD_FILENAMES` pointing at
//! `lvp_icd*.json`, `WGPU_BACKEND=vulkan`).

mod common;

mod attention;
mod copy;
mod device;
mod elementwise;
mod experts;
mod fallback;
mod linalg;
mod nn;
mod persistent;
mod pool;
mod reduction;
mod windows;
