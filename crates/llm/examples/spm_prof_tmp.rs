use tempra_llm::gguf::Metadata;
use tempra_llm::testing::SyntheticVocab;
use tempra_llm::tokenizer::{TokenizeOptions, Vocabulary};
fn main() {
    let mut md = Metadata::new();
    SyntheticVocab::new(32_000).unwrap().write_metadata(&mut md);
    let v = Vocabulary::from_gguf(&md).unwrap();
    let base = "Once upon a time, there was a little girl named Lily. She loved the beautiful park and understanding everything! ";
    let text = base.repeat((1 << 20) / base.len());
    let mut n = 0;
    let t = std::time::Instant::now();
    for _ in 0..5 {
        n += v.tokenize(&text, TokenizeOptions::PLAIN).len();
    }
    println!("{:?} per MiB ({n})", t.elapsed() / 5);
}
