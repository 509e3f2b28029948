//! Learning-rate schedule: linear warmup, then cosine decay.

/// Linear warmup from `peak_lr / warmup_steps` to `peak_lr` over `warmup_steps`, then a
/// cosine decay to `min_lr` at `total_steps`, then `min_lr`.
///
/// ```
/// use tempra_autograd::optim::WarmupCosine;
///
/// let s = WarmupCosine { peak_lr: 1e-3, min_lr: 1e-4, warmup_steps: 10, total_steps: 110 };
/// assert_eq!(s.lr(9), 1e-3);
/// assert!((s.lr(60) - 5.5e-4).abs() < 1e-12); // half-way down
/// assert_eq!(s.lr(500), 1e-4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupCosine {
    /// The rate at the end of warmup.
    pub peak_lr: f64,
    /// The rate at and after `total_steps`.
    pub min_lr: f64,
    /// Steps of linear warmup (0 for none).
    pub warmup_steps: usize,
    /// The step where the decay ends.
    pub total_steps: usize,
}

impl WarmupCosine {
    /// The learning rate for step `step` (counting from 0).
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.peak_lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let decay_steps = self.total_steps.saturating_sub(self.warmup_steps);
        if step >= self.total_steps || decay_steps == 0 {
            return self.min_lr;
        }
        let progress = (step - self.warmup_steps) as f64 / decay_steps as f64;
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.min_lr + (self.peak_lr - self.min_lr) * cosine
    }
}
