//! tempra-autograd: reverse-mode automatic differentiation over the tempra tensor facade,
//! so one forward serves inference and training.
//!
//! - [`Var`]: a tensor plus, when it requires grad, a node on the tape. Constants record
//!   nothing: inference through `Var` costs what plain tensors cost.
//! - [`Autograd`]: wraps an [`ExecContext`](tempra_tensor::ExecContext) and offers every
//!   differentiable facade op over `Var`s; [`Autograd::backward`] returns a [`GradStore`].
//! - [`no_grad`], [`Var::detach`]: stop recording.
//! - [`optim`]: SGD with momentum, AdamW, warmup + cosine schedule, global-norm clipping.
//! - [`ParamStore`]: named parameters, saved and loaded as safetensors.
//! - [`gradcheck`]: central finite differences in F64 against every backward rule.
//!
//! ```
//! use tempra_autograd::{Autograd, Var};
//! use tempra_tensor::{DType, ExecContext};
//!
//! let ag = Autograd::new(ExecContext::reference());
//! let w = Var::variable(ag.ctx().randn(&[3, 4], DType::F32, 0.0, 0.5, 1)?);
//! let x = Var::constant(ag.ctx().randn(&[2, 4], DType::F32, 0.0, 1.0, 2)?);
//! let logits = ag.linear(&x, &w, None)?; // [2, 3]
//! let targets = ag.ctx().from_slice(&[0u32, 2], &[2])?;
//! let loss = ag.cross_entropy(&logits, &targets, None)?;
//! let grads = ag.backward(&loss)?;
//! assert_eq!(grads.get(&w).unwrap().dims(), [3, 4]);
//! # Ok::<(), tempra_autograd::AutogradError>(())
//! ```

mod autograd;
mod backward;
mod error;
mod grad_mode;
mod grad_store;
pub mod gradcheck;
mod node;
mod ops;
pub mod optim;
mod param_store;
pub mod safetensors;
mod var;

pub use autograd::Autograd;
pub use error::{AutogradError, Result};
pub use grad_mode::{NoGradGuard, is_grad_enabled, no_grad};
pub use grad_store::GradStore;
pub use node::tracking;
pub use param_store::{ParamId, ParamStore};
pub use var::{Var, VarId};
