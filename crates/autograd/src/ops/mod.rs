//! The op surface of [`crate::Autograd`], one file per family, each op with its backward
//! rule next to it.

mod attention;
mod elementwise;
mod experts;
mod linalg;
mod loss;
mod masks;
mod norm;
mod reduction;
mod structural;
mod views;
