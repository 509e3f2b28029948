//! `GradStore`: the gradients one `backward` produced, keyed by variable.

use std::collections::HashMap;

use tempra_tensor::Tensor;

use crate::var::{Var, VarId};

/// Gradients of the leaf variables a `backward` reached, keyed by [`VarId`]. Each has its
/// variable's shape (in the compute dtype: F32 for half-precision inputs). Intermediate
/// results' gradients are freed as soon as they are consumed and never appear here.
#[derive(Debug, Default)]
pub struct GradStore {
    grads: HashMap<VarId, Tensor>,
}

impl GradStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes every gradient, keeping the capacity (a store reused across steps with
    /// [`crate::Autograd::backward_into`]).
    pub fn clear(&mut self) {
        self.grads.clear();
    }

    /// The gradient of `var`, if backward reached it.
    pub fn get(&self, var: &Var) -> Option<&Tensor> {
        var.id().and_then(|id| self.grads.get(&id))
    }

    /// The gradient keyed by `id`.
    pub fn get_id(&self, id: VarId) -> Option<&Tensor> {
        self.grads.get(&id)
    }

    /// Takes the gradient of `var` out of the store.
    pub fn remove(&mut self, var: &Var) -> Option<Tensor> {
        var.id().and_then(|id| self.grads.remove(&id))
    }

    /// Sets the gradient keyed by `id`, returning the previous one.
    pub fn insert(&mut self, id: VarId, grad: Tensor) -> Option<Tensor> {
        self.grads.insert(id, grad)
    }

    /// Every (id, gradient) pair, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (VarId, &Tensor)> {
        self.grads.iter().map(|(&id, t)| (id, t))
    }

    /// Every gradient, writable (for clipping or scaling in place).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Tensor> {
        self.grads.values_mut()
    }

    /// How many gradients are stored.
    pub fn len(&self) -> usize {
        self.grads.len()
    }

    /// Whether no gradient is stored.
    pub fn is_empty(&self) -> bool {
        self.grads.is_empty()
    }
}
