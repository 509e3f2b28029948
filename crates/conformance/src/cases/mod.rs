//! The op list: every `Backend` op on odd and round sizes, broadcast and strided views,
//! each float and block format it takes. One list, run unchanged on every backend.

mod attention;
mod elementwise;
mod experts;
mod linalg;
mod nn;
mod reduction;
mod structural;
mod training;

use crate::case::Case;
use crate::error::Result;

/// Every case of the suite, in a fixed order.
pub fn all() -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    elementwise::push(&mut cases)?;
    reduction::push(&mut cases)?;
    linalg::push(&mut cases)?;
    nn::push(&mut cases)?;
    attention::push(&mut cases)?;
    structural::push(&mut cases)?;
    training::push(&mut cases)?;
    experts::push(&mut cases)?;
    Ok(cases)
}

/// The block formats weights come in (GGUF's, without the activation-only Q8_1/Q8_K).
/// The IQ1/IQ2/IQ3 formats have no quantizer: their weights are random blocks
/// ([`crate::case::Inputs::normal_as`]).
pub const WEIGHT_BLOCK_FORMATS: [tempra_tensor::DType; 22] = {
    use tempra_tensor::DType::*;
    [
        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2K, Q3K, Q4K, Q5K, Q6K, IQ4NL, IQ4XS, IQ3S, IQ3XXS, IQ2S,
        IQ2XS, IQ2XXS, IQ1S, IQ1M, TQ1_0, TQ2_0, MXFP4,
    ]
};
