//! The dot products over weights as GGUF stores them, one row at a time against one to
//! four activation rows: the weight block is unpacked once and dotted with every row
//! (the prefill tile); with one row it is the decode GEMV.

pub(super) mod k_quants;
pub(super) mod legacy;
