//! Loading the vocabulary for `tempra tokenize` / `detokenize`: from a GGUF file (a
//! full model or a vocabulary-only file), a llama2.c checkpoint with `--tokenizer`, or a
//! llama2.c tokenizer file (`tok512.bin`) given directly as `-m`.

use std::path::Path;

use anyhow::Context;
use tempra_llm::gguf::MAGIC;
use tempra_llm::llama2c::Llama2cVocab;
use tempra_llm::tokenizer::Vocabulary;

use super::model_arg::ModelArgs;

/// Opens the vocabulary `args` names.
pub(crate) fn load_vocabulary(args: &ModelArgs) -> anyhow::Result<Vocabulary> {
    let path = &args.model;
    if args.tokenizer.is_none() && !args.is_embedded() && !starts_with_gguf_magic(path)? {
        let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
        if let Some(count) = llama2c_token_count(&bytes) {
            let vocab =
                Llama2cVocab::parse(&bytes, count).with_context(|| path.display().to_string())?;
            return Vocabulary::from_llama2c(&vocab).with_context(|| path.display().to_string());
        }
        anyhow::bail!(
            "{}: not a GGUF file or a llama2.c tokenizer file (for a llama2.c checkpoint, add --tokenizer FILE)",
            path.display()
        );
    }
    let model = args.open()?;
    Vocabulary::from_gguf(model.metadata())
        .with_context(|| format!("{}: tokenizer", path.display()))
}

fn starts_with_gguf_magic(path: &Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let n = file
        .read(&mut magic)
        .with_context(|| path.display().to_string())?;
    Ok(n == 4 && &magic == MAGIC)
}

/// The number of pieces in a llama2.c tokenizer file (`i32` max length, then per piece
/// an `f32` score, an `i32` length and the bytes), when the records end exactly at the
/// end of the file and each piece is no longer than the declared maximum.
fn llama2c_token_count(bytes: &[u8]) -> Option<usize> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let max_len = usize::try_from(word(0)?).ok().filter(|&m| m > 0)?;
    let mut pos = 4usize;
    let mut count = 0usize;
    while pos < bytes.len() {
        let len = usize::try_from(word(pos + 4)?)
            .ok()
            .filter(|&l| l <= max_len)?;
        pos = pos.checked_add(8 + len)?;
        count += 1;
    }
    (pos == bytes.len() && count >= 3).then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_llama2c_records() {
        let mut file = 4i32.to_le_bytes().to_vec();
        for piece in [&b"<unk>"[..4], b"ab", b"", b"abcd"] {
            file.extend(0f32.to_le_bytes());
            file.extend((piece.len() as i32).to_le_bytes());
            file.extend(piece);
        }
        assert_eq!(llama2c_token_count(&file), Some(4));
        assert_eq!(llama2c_token_count(&file[..file.len() - 1]), None);
        assert_eq!(llama2c_token_count(b"GGUF\x03\0\0\0"), None);
        assert_eq!(llama2c_token_count(&[]), None);
    }
}
