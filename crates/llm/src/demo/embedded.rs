//! The demo model embedded in the binary (`assets/demo-stories.gguf`, made by
//! `cargo xtask train-demo`), when the file was present at build time.

/// Bytes with a 64-byte aligned start, so that an embedded GGUF with
/// `general.alignment = 64` has every tensor 64-byte aligned and loads zero-copy.
#[cfg(tempra_demo_model)]
#[repr(C, align(64))]
struct Aligned<T: ?Sized>(T);

#[cfg(tempra_demo_model)]
static EMBEDDED: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/demo-stories.gguf"
)));

/// The embedded demo model's GGUF bytes; `None` when the crate was built without
/// `assets/demo-stories.gguf`. Load it with
/// [`Model::load_static`](crate::engine::Model::load_static).
pub fn embedded_demo_model() -> Option<&'static [u8]> {
    #[cfg(tempra_demo_model)]
    {
        Some(&EMBEDDED.0)
    }
    #[cfg(not(tempra_demo_model))]
    {
        None
    }
}
