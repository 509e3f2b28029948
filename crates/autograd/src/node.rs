//! Tape nodes: one per op result that requires grad, linked to its inputs' nodes by `Arc`
//! so the graph lives exactly as long as something holds its outputs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tempra_tensor::{ExecContext, Shape, Tensor};

use crate::error::Result;
use crate::grad_mode::is_grad_enabled;
use crate::var::{Var, VarId};

/// Input gradients returned by a backward rule, one per input in order (`None` where the
/// input needs none). A gradient may have the op's output shape where the input was
/// broadcast: the engine sums it back to the input's shape.
pub(crate) type Grads = Vec<Option<Tensor>>;

/// A backward rule: given the context, the output's gradient and which inputs need a
/// gradient, the inputs' gradients. It owns the views it saved; running it (or dropping
/// it unrun) releases them.
pub(crate) type BackwardFn = Box<dyn FnOnce(&ExecContext, Tensor, &[bool]) -> Result<Grads> + Send>;

/// Boxes a backward rule (and pins down the closure's signature for inference).
pub(crate) fn rule<F>(f: F) -> BackwardFn
where
    F: FnOnce(&ExecContext, Tensor, &[bool]) -> Result<Grads> + Send + 'static,
{
    Box::new(f)
}

/// One recorded value: a leaf variable (no parents, no rule) or an op result.
pub(crate) struct Node {
    pub(crate) id: VarId,
    /// The op that made it (`"leaf"` for variables).
    pub(crate) op: &'static str,
    /// The value's shape, which its gradient must have.
    pub(crate) shape: Shape,
    /// The inputs' nodes, in input order; `None` for constant inputs.
    pub(crate) parents: Vec<Option<Arc<Node>>>,
    /// The backward rule, taken out (and so dropped) when it runs.
    pub(crate) rule: Mutex<Option<BackwardFn>>,
}

impl Node {
    /// A leaf node (a variable) of `shape`.
    pub(crate) fn leaf(shape: Shape) -> Node {
        Node {
            id: VarId::fresh(),
            op: "leaf",
            shape,
            parents: Vec::new(),
            rule: Mutex::new(None),
        }
    }

    /// Whether this is a variable rather than an op result.
    pub(crate) fn is_leaf(&self) -> bool {
        self.parents.is_empty()
    }
}

impl Drop for Node {
    /// Drops the chain of parents iteratively: a long graph (thousands of ops) must not
    /// recurse once per node on the stack.
    fn drop(&mut self) {
        if self.parents.is_empty() {
            return;
        }
        let mut stack: Vec<Arc<Node>> = std::mem::take(&mut self.parents)
            .into_iter()
            .flatten()
            .collect();
        while let Some(node) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(node) {
                stack.extend(std::mem::take(&mut node.parents).into_iter().flatten());
            }
        }
    }
}

impl VarId {
    /// A process-unique id.
    pub(crate) fn fresh() -> VarId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        VarId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Whether an op over `inputs` records: some input requires grad and grad mode is on.
/// Whether an op over `inputs` records a node on the tape: some input requires grad
/// and grad mode is on. Callers that supply an op's output themselves (a step arena)
/// do so only when this is false.
#[inline]
pub fn tracking(inputs: &[&Var]) -> bool {
    inputs.iter().any(|v| v.node.is_some()) && is_grad_enabled()
}

/// Wraps an op's output: a constant when nothing is tracked (no allocation beyond the
/// tensor), else a node whose rule `make` builds from the output. `make` only runs when
/// recording, so constants never clone anything to save.
#[inline]
pub(crate) fn record(
    out: Tensor,
    op: &'static str,
    inputs: &[&Var],
    make: impl FnOnce(&Tensor) -> BackwardFn,
) -> Var {
    if !tracking(inputs) {
        return Var::constant(out);
    }
    let rule = make(&out);
    let node = Node {
        id: VarId::fresh(),
        op,
        shape: *out.shape(),
        parents: inputs.iter().map(|v| v.node.clone()).collect(),
        rule: Mutex::new(Some(rule)),
    };
    Var {
        tensor: out,
        node: Some(Arc::new(node)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tempra_tensor::Shape;

    use super::Node;
    use crate::var::VarId;

    #[test]
    fn a_million_node_chain_drops_without_recursion() {
        let mut last = Arc::new(Node::leaf(Shape::SCALAR));
        for _ in 0..1_000_000 {
            let node = Node {
                id: VarId::fresh(),
                op: "chain",
                shape: Shape::SCALAR,
                parents: vec![Some(last), None],
                rule: Mutex::new(None),
            };
            last = Arc::new(node);
        }
        drop(last);
    }

    #[test]
    fn ids_are_unique() {
        let (a, b) = (VarId::fresh(), VarId::fresh());
        assert_ne!(a, b);
        assert!(b > a);
    }
}
