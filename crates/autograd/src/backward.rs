//! The backward pass: topological order from the root, each rule run once and released
//! right after, gradients accumulated per input and reduced to broadcast inputs' shapes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tempra_tensor::{ExecContext, Shape, Tensor};

use crate::error::{AutogradError, Result};
use crate::grad_store::GradStore;
use crate::node::Node;
use crate::var::{Var, VarId};

/// The working sets of one backward pass (node order, DFS stack and visited set,
/// pending gradients, a rule's input mask), kept by [`crate::Autograd`] between calls so
/// a training step's backward reuses their capacity instead of allocating them afresh.
/// Empty between calls: the graph is never retained.
#[derive(Default)]
pub(crate) struct BackwardScratch {
    order: Vec<Arc<Node>>,
    visited: HashSet<VarId>,
    stack: Vec<(Arc<Node>, usize)>,
    pending: HashMap<VarId, Tensor>,
    needs: Vec<bool>,
}

impl std::fmt::Debug for BackwardScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackwardScratch")
            .field("order_capacity", &self.order.capacity())
            .field("pending_capacity", &self.pending.capacity())
            .finish()
    }
}

impl BackwardScratch {
    /// Drops everything held (node handles, gradients), keeping the capacity.
    fn clear(&mut self) {
        self.order.clear();
        self.visited.clear();
        self.stack.clear();
        self.pending.clear();
        self.needs.clear();
    }
}

/// Runs backward from `root` with gradient `seed` (the root's shape), writing the leaf
/// gradients into `store` (cleared first) and working in `scratch`.
pub(crate) fn run(
    ctx: &ExecContext,
    root: &Var,
    seed: Tensor,
    scratch: &mut BackwardScratch,
    store: &mut GradStore,
) -> Result<()> {
    let node = root.node.as_ref().ok_or(AutogradError::NoGraph)?;
    if seed.shape() != root.shape() {
        return Err(AutogradError::SeedShape {
            root: *root.shape(),
            seed: *seed.shape(),
        });
    }
    store.clear();
    scratch.clear();
    let result = run_in(ctx, node, seed, scratch, store);
    scratch.clear();
    result
}

fn run_in(
    ctx: &ExecContext,
    node: &Arc<Node>,
    seed: Tensor,
    scratch: &mut BackwardScratch,
    store: &mut GradStore,
) -> Result<()> {
    topological_order(node, scratch);
    let BackwardScratch {
        order,
        pending,
        needs,
        ..
    } = scratch;
    pending.insert(node.id, seed);
    // `order` is post-order (inputs before users): walk it from the root down.
    for node in order.iter().rev() {
        let Some(grad) = pending.remove(&node.id) else {
            continue;
        };
        if node.is_leaf() {
            store.insert(node.id, grad);
            continue;
        }
        let rule = node
            .rule
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .ok_or(AutogradError::GraphConsumed { op: node.op })?;
        needs.clear();
        needs.extend(node.parents.iter().map(Option::is_some));
        // Running the rule consumes it: the views it saved are released right here.
        let grads = rule(ctx, grad, needs)?;
        for (parent, grad) in node.parents.iter().zip(grads) {
            let (Some(parent), Some(grad)) = (parent, grad) else {
                continue;
            };
            let grad = sum_to_shape(ctx, node.op, grad, &parent.shape)?;
            accumulate(ctx, pending, parent.id, grad)?;
        }
    }
    Ok(())
}

/// Every node reachable from `root` into `scratch.order`, inputs before their users
/// (iterative DFS).
fn topological_order(root: &Arc<Node>, scratch: &mut BackwardScratch) {
    let BackwardScratch {
        order,
        visited,
        stack,
        ..
    } = scratch;
    stack.push((Arc::clone(root), 0));
    visited.insert(root.id);
    while let Some((node, next)) = stack.last_mut() {
        let parent = node.parents[*next..].iter().enumerate().find_map(|(i, p)| {
            p.as_ref()
                .filter(|p| !visited.contains(&p.id))
                .map(|p| (i, Arc::clone(p)))
        });
        match parent {
            Some((i, parent)) => {
                *next += i + 1;
                visited.insert(parent.id);
                stack.push((parent, 0));
            }
            None => {
                if let Some((node, _)) = stack.pop() {
                    order.push(node);
                }
            }
        }
    }
}

/// Adds `grad` into the pending gradient of `id` (in place when that buffer is unshared).
fn accumulate(
    ctx: &ExecContext,
    pending: &mut HashMap<VarId, Tensor>,
    id: VarId,
    grad: Tensor,
) -> Result<()> {
    let total = match pending.remove(&id) {
        None => grad,
        Some(old) if old.is_unique() && old.is_contiguous() => ctx.add_inplace(old, &grad)?,
        Some(old) if grad.is_unique() && grad.is_contiguous() => ctx.add_inplace(grad, &old)?,
        Some(old) => ctx.add(&old, &grad)?,
    };
    pending.insert(id, total);
    Ok(())
}

/// Sums `grad` over the dims along which an input of `shape` was broadcast to it.
pub(crate) fn sum_to_shape(
    ctx: &ExecContext,
    op: &'static str,
    grad: Tensor,
    shape: &Shape,
) -> Result<Tensor> {
    if grad.shape() == shape {
        return Ok(grad);
    }
    let mismatch = |got: &Tensor| AutogradError::GradientShape {
        op,
        expected: *shape,
        got: *got.shape(),
    };
    if grad.rank() < shape.rank() {
        return Err(mismatch(&grad));
    }
    let mut out = grad;
    while out.rank() > shape.rank() {
        out = ctx.sum(&out, 0, false)?;
    }
    for d in 0..shape.rank() {
        let (want, have) = (shape.dims()[d], out.dims()[d]);
        if want == have {
            continue;
        }
        if want != 1 {
            return Err(mismatch(&out));
        }
        out = ctx.sum(&out, d, true)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tempra_tensor::{DType, ExecContext, Shape};

    use super::sum_to_shape;
    use crate::error::AutogradError;

    #[test]
    fn sum_to_shape_reduces_leading_and_broadcast_dims() {
        let ctx = ExecContext::reference();
        let g = ctx
            .arange(0.0, 24.0, 1.0, DType::F32)
            .unwrap()
            .reshape(&[2, 3, 4])
            .unwrap();
        let to = |dims: &[usize]| sum_to_shape(&ctx, "t", g.clone(), &Shape::new(dims).unwrap());
        assert_eq!(
            to(&[4]).unwrap().to_vec_f32().unwrap(),
            [60.0, 66.0, 72.0, 78.0]
        );
        assert_eq!(
            to(&[3, 1]).unwrap().to_vec_f32().unwrap(),
            [60.0, 92.0, 124.0]
        );
        assert_eq!(to(&[2, 3, 4]).unwrap().dims(), [2, 3, 4]);
        assert_eq!(to(&[1, 1, 1]).unwrap().to_vec_f32().unwrap(), [276.0]);
        let err = to(&[2, 4]).unwrap_err();
        assert!(
            matches!(err, AutogradError::GradientShape { op: "t", .. }),
            "{err}"
        );
        assert!(matches!(
            to(&[1, 2, 3, 4]),
            Err(AutogradError::GradientShape { .. })
        ));
    }
}
