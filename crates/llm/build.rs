//! Embeds the demo model when its file exists: sets `cfg(tempra_demo_model)` so
//! `tempra_llm::demo::embedded_demo_model` includes `assets/demo-stories.gguf`. The crate
//! builds without the file (before `cargo xtask train-demo` has made it).

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tempra_demo_model)");
    println!("cargo::rerun-if-changed=assets");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    if Path::new(&manifest)
        .join("assets/demo-stories.gguf")
        .is_file()
    {
        println!("cargo::rustc-cfg=tempra_demo_model");
    }
}
