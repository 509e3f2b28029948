//! `Var`: a tensor plus, when it requires grad, its node on the tape.

use std::fmt;
use std::sync::Arc;

use tempra_tensor::{DType, Shape, Tensor};

use crate::node::Node;

/// Identifies a variable or op result on the tape; gradients are keyed by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub(crate) u64);

impl fmt::Display for VarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "var#{}", self.0)
    }
}

/// A tensor that the same forward code can infer or train with.
///
/// - A **constant** ([`Var::constant`], or `From<Tensor>`) is just the tensor: ops on
///   constants record nothing and allocate nothing beyond their outputs, which free as
///   soon as they drop, exactly like plain tensors.
/// - A **variable** ([`Var::variable`]) is a leaf that requires grad. Any op with a
///   variable input returns a result that requires grad and holds a node whose backward
///   rule retains views (refcounts, no copies) of what the rule needs.
///
/// Cloning is cheap (two refcounts). View methods (`narrow`, `reshape`, `transpose`, ...)
/// mirror [`Tensor`]'s and need no context; compute ops live on [`crate::Autograd`].
#[derive(Clone)]
pub struct Var {
    pub(crate) tensor: Tensor,
    pub(crate) node: Option<Arc<Node>>,
}

impl Var {
    /// A constant: records nothing, costs nothing.
    #[inline]
    pub fn constant(tensor: Tensor) -> Var {
        Var { tensor, node: None }
    }

    /// A leaf variable (requires grad) with a fresh [`VarId`].
    pub fn variable(tensor: Tensor) -> Var {
        let node = Node::leaf(*tensor.shape());
        Var {
            tensor,
            node: Some(Arc::new(node)),
        }
    }

    /// The value.
    #[inline]
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// The value, dropping the node (the graph stays alive only through other holders).
    #[inline]
    pub fn into_tensor(self) -> Tensor {
        self.tensor
    }

    /// Whether this value is on the tape (a variable or computed from one).
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.node.is_some()
    }

    /// The id gradients are keyed by; `None` for constants.
    #[inline]
    pub fn id(&self) -> Option<VarId> {
        self.node.as_ref().map(|n| n.id)
    }

    /// Whether this is a leaf variable (made by [`Var::variable`]), not an op result.
    pub fn is_leaf(&self) -> bool {
        self.node.as_ref().is_some_and(|n| n.is_leaf())
    }

    /// The op that produced this value: `"leaf"` for variables, `None` for constants.
    pub fn op_name(&self) -> Option<&'static str> {
        self.node.as_ref().map(|n| n.op)
    }

    /// A constant sharing this value's storage: gradients stop here.
    #[inline]
    pub fn detach(&self) -> Var {
        Var::constant(self.tensor.clone())
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &Shape {
        self.tensor.shape()
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        self.tensor.dims()
    }

    /// The rank.
    #[inline]
    pub fn rank(&self) -> usize {
        self.tensor.rank()
    }

    /// The number of elements.
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.tensor.elem_count()
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.tensor.dtype()
    }
}

impl From<Tensor> for Var {
    /// A constant.
    fn from(tensor: Tensor) -> Var {
        Var::constant(tensor)
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Var");
        s.field("layout", self.tensor.layout());
        match &self.node {
            Some(node) => s.field("id", &node.id).field("op", &node.op),
            None => s.field("constant", &true),
        };
        s.finish()
    }
}
