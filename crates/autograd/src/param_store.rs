//! `ParamStore`: a model's named parameters, the single holder of their values so that
//! optimizers can update them in place, saved and loaded as safetensors.

use std::collections::HashMap;
use std::ops::Index;
use std::path::Path;

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{AutogradError, Result};
use crate::safetensors;
use crate::var::{Var, VarId};

/// A handle to one parameter of a [`ParamStore`] (its position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(usize);

struct Entry {
    name: String,
    var: Var,
    trainable: bool,
}

/// Named parameters in insertion order. Trainable ones are leaf variables with a stable
/// [`VarId`] (gradients and optimizer state are keyed by it); frozen ones are constants
/// (e.g. quantized weights).
///
/// A model holds [`ParamId`]s and its forward reads `&params[id]`: the store stays the only
/// long-lived holder of each value, so once a step's graph and borrowed clones are
/// dropped, an optimizer updates every parameter in place (no copy, no allocation).
/// Keeping a clone of a parameter's `Var` elsewhere makes the update copy instead, and
/// that clone then goes stale: see [`crate::optim::StepReport`].
///
/// ```
/// use tempra_autograd::{Autograd, ParamStore};
/// use tempra_tensor::{DType, ExecContext};
///
/// let ag = Autograd::new(ExecContext::reference());
/// let mut params = ParamStore::new();
/// let w = params.add("w", ag.ctx().randn(&[4, 3], DType::F32, 0.0, 0.1, 1)?)?;
/// let x = ag.ctx().randn(&[2, 3], DType::F32, 0.0, 1.0, 2)?;
/// let y = ag.linear(&x.into(), &params[w], None)?;
/// assert!(y.requires_grad());
/// # Ok::<(), tempra_autograd::AutogradError>(())
/// ```
#[derive(Default)]
pub struct ParamStore {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    /// Stands in for a value while an optimizer holds it by value (rank 0, host).
    placeholder: Option<Tensor>,
}

impl ParamStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn insert(&mut self, name: &str, var: Var, trainable: bool) -> Result<ParamId> {
        if self.by_name.contains_key(name) {
            return Err(AutogradError::Parameter {
                name: name.into(),
                reason: "already in the store".into(),
            });
        }
        let id = ParamId(self.entries.len());
        self.by_name.insert(name.to_string(), id.0);
        self.entries.push(Entry {
            name: name.to_string(),
            var,
            trainable,
        });
        Ok(id)
    }

    /// Adds a trainable parameter (a leaf variable) holding `value`. The store should be
    /// the value's only holder for in-place updates (pass the tensor by value).
    pub fn add(&mut self, name: &str, value: Tensor) -> Result<ParamId> {
        self.insert(name, Var::variable(value), true)
    }

    /// Adds a frozen parameter (a constant: no gradient, never updated).
    pub fn add_frozen(&mut self, name: &str, value: Tensor) -> Result<ParamId> {
        self.insert(name, Var::constant(value), false)
    }

    /// The parameter `id`, or `None` for an id of another store.
    pub fn var(&self, id: ParamId) -> Option<&Var> {
        self.entries.get(id.0).map(|e| &e.var)
    }

    /// The parameter called `name`.
    pub fn get(&self, name: &str) -> Option<&Var> {
        self.id(name).and_then(|id| self.var(id))
    }

    /// The id of the parameter called `name`.
    pub fn id(&self, name: &str) -> Option<ParamId> {
        self.by_name.get(name).map(|&i| ParamId(i))
    }

    /// The name of parameter `id`.
    pub fn name(&self, id: ParamId) -> Option<&str> {
        self.entries.get(id.0).map(|e| e.name.as_str())
    }

    /// Whether parameter `id` is trainable.
    pub fn is_trainable(&self, id: ParamId) -> bool {
        self.entries.get(id.0).is_some_and(|e| e.trainable)
    }

    /// Every parameter in insertion order, with its id and name.
    pub fn iter(&self) -> impl Iterator<Item = (ParamId, &str, &Var)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| (ParamId(i), e.name.as_str(), &e.var))
    }

    /// The trainable parameters' ids, in insertion order.
    pub fn trainable_ids(&self) -> impl Iterator<Item = ParamId> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.trainable)
            .map(|(i, _)| ParamId(i))
    }

    /// How many parameters the store holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of trainable scalars.
    pub fn trainable_elements(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.trainable)
            .map(|e| e.var.elem_count())
            .sum()
    }

    /// Replaces parameter `id`'s value with one of the same shape and dtype, keeping its
    /// [`VarId`] (so optimizer state stays attached).
    pub fn set(&mut self, id: ParamId, value: Tensor) -> Result<()> {
        let entry = self.entry_mut(id)?;
        if value.shape() != entry.var.shape() || value.dtype() != entry.var.dtype() {
            return Err(AutogradError::Parameter {
                name: entry.name.clone(),
                reason: format!(
                    "new value {} {} does not match {} {}",
                    value.shape(),
                    value.dtype(),
                    entry.var.shape(),
                    entry.var.dtype()
                ),
            });
        }
        entry.var.tensor = value;
        Ok(())
    }

    fn entry_mut(&mut self, id: ParamId) -> Result<&mut Entry> {
        let len = self.entries.len();
        self.entries
            .get_mut(id.0)
            .ok_or_else(|| AutogradError::Parameter {
                name: format!("#{}", id.0),
                reason: format!("no such parameter (the store holds {len})"),
            })
    }

    /// Runs `f` on parameter `id`'s value taken by value (so in-place facade ops can reuse
    /// its buffer) and stores the result, which must keep the shape. On error the
    /// parameter is left holding a rank-0 placeholder.
    pub(crate) fn update(
        &mut self,
        id: ParamId,
        f: impl FnOnce(Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        let placeholder = match &self.placeholder {
            Some(p) => p.clone(),
            None => {
                let p = Tensor::owned_zeros(&[], DType::F32)?;
                self.placeholder = Some(p.clone());
                p
            }
        };
        let entry = self.entry_mut(id)?;
        let value = std::mem::replace(&mut entry.var.tensor, placeholder);
        let shape = *value.shape();
        let new = f(value)?;
        if *new.shape() != shape {
            return Err(AutogradError::Parameter {
                name: entry.name.clone(),
                reason: format!("update changed the shape {shape} to {}", new.shape()),
            });
        }
        entry.var.tensor = new;
        Ok(())
    }

    /// The [`VarId`] of a trainable parameter.
    pub(crate) fn var_id(&self, id: ParamId) -> Option<VarId> {
        self.var(id).and_then(Var::id)
    }

    /// Writes every parameter (trainable and frozen, plain dtypes) to a safetensors file,
    /// with `metadata` pairs in its header.
    pub fn save_safetensors(
        &self,
        ctx: &ExecContext,
        path: &Path,
        metadata: &[(&str, &str)],
    ) -> Result<()> {
        let tensors: Vec<(&str, &Tensor)> = self
            .entries
            .iter()
            .map(|e| (e.name.as_str(), &e.var.tensor))
            .collect();
        safetensors::save(ctx, path, &tensors, metadata)
    }

    /// A new store of trainable parameters from a safetensors file, in file order.
    pub fn from_safetensors(ctx: &ExecContext, path: &Path) -> Result<ParamStore> {
        let mut store = ParamStore::new();
        for (name, tensor) in safetensors::load(ctx, path)?.tensors {
            store.add(&name, tensor)?;
        }
        Ok(store)
    }

    /// Overwrites every parameter of this store from a safetensors file (matched by name,
    /// shapes and dtypes checked, ids kept). A parameter missing from the file is an
    /// error; tensors in the file that the store lacks are ignored. Returns how many
    /// parameters were loaded.
    pub fn load_safetensors(&mut self, ctx: &ExecContext, path: &Path) -> Result<usize> {
        let mut loaded: HashMap<String, Tensor> =
            safetensors::load(ctx, path)?.tensors.into_iter().collect();
        for i in 0..self.entries.len() {
            let name = self.entries[i].name.clone();
            let value = loaded
                .remove(&name)
                .ok_or_else(|| AutogradError::Parameter {
                    name: name.clone(),
                    reason: format!("missing from {}", path.display()),
                })?;
            self.set(ParamId(i), value)?;
        }
        Ok(self.entries.len())
    }
}

impl Index<ParamId> for ParamStore {
    type Output = Var;

    /// The parameter `id`. Panics for an id from another, larger store (a programming
    /// error); [`ParamStore::var`] returns an `Option` instead.
    fn index(&self, id: ParamId) -> &Var {
        &self.entries[id.0].var
    }
}

impl std::fmt::Debug for ParamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|e| (&e.name, e.var.shape())))
            .finish()
    }
}
