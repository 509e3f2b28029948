//! `TokenType`: the values of `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).

/// What kind of token a vocabulary entry is, as GGUF stores it (`i32` per token).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TokenType {
    /// No type given.
    Undefined = 0,
    /// An ordinary piece.
    Normal = 1,
    /// The unknown token (`<unk>`).
    Unknown = 2,
    /// A control token (`<s>`, `</s>`, chat markers): never produced from plain text.
    Control = 3,
    /// A user-defined token, matched literally in text.
    UserDefined = 4,
    /// An unused slot.
    Unused = 5,
    /// A byte-fallback token (`<0x41>`).
    Byte = 6,
}

impl TokenType {
    /// The type with GGUF value `v`, or `None` for an unknown value.
    pub const fn from_i32(v: i32) -> Option<TokenType> {
        Some(match v {
            0 => TokenType::Undefined,
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }

    /// The GGUF value.
    pub const fn as_i32(self) -> i32 {
        self as i32
    }
}
