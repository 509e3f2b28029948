//! Whether ops record: the thread's grad mode and the [`no_grad`] scope guard.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on variables record backward rules on this thread (true unless inside a
/// [`no_grad`] scope).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns recording off on this thread until the returned guard drops: ops on variables
/// then produce constants, exactly as for inference. Guards nest.
///
/// ```
/// use tempra_autograd::{Autograd, Var, no_grad};
/// use tempra_tensor::ExecContext;
///
/// let ag = Autograd::new(ExecContext::reference());
/// let w = Var::variable(ag.ctx().from_slice(&[1.0f32, 2.0], &[2])?);
/// {
///     let _guard = no_grad();
///     assert!(!ag.exp(&w)?.requires_grad());
/// }
/// assert!(ag.exp(&w)?.requires_grad());
/// # Ok::<(), tempra_autograd::AutogradError>(())
/// ```
#[must_use = "recording resumes as soon as the guard drops"]
pub fn no_grad() -> NoGradGuard {
    let previous = GRAD_ENABLED.with(|g| g.replace(false));
    NoGradGuard {
        previous,
        _thread_bound: PhantomData,
    }
}

/// Restores the previous grad mode when dropped. Bound to the thread that made it.
#[derive(Debug)]
pub struct NoGradGuard {
    previous: bool,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}
