//! The kinds of elementwise and reduction ops, shared by the facade and every backend.

/// Elementwise ops of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// -x
    Neg,
    /// |x|
    Abs,
    /// x²
    Sqr,
    /// 1/x
    Recip,
    /// eˣ
    Exp,
    /// ln x
    Log,
    /// √x
    Sqrt,
    /// 1/√x
    Rsqrt,
    /// tanh x
    Tanh,
    /// 1/(1+e⁻ˣ)
    Sigmoid,
    /// max(x, 0)
    Relu,
    /// x·sigmoid(x)
    Silu,
    /// GELU, tanh approximation: 0.5x(1+tanh(√(2/π)(x+0.044715x³)))
    GeluTanh,
    /// GELU, exact: 0.5x(1+erf(x/√2))
    GeluErf,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 14] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqr,
        UnaryOp::Recip,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Silu,
        UnaryOp::GeluTanh,
        UnaryOp::GeluErf,
    ];

    /// The op's name, for errors and benchmarks.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sqr => "sqr",
            UnaryOp::Recip => "recip",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Silu => "silu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::GeluErf => "gelu_erf",
        }
    }
}

impl UnaryOp {
    /// Applies the op to one f64 value (the reference semantics every backend matches).
    #[inline]
    pub fn apply(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Sqr => x * x,
            UnaryOp::Recip => 1.0 / x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Relu => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Silu => x / (1.0 + (-x).exp()),
            UnaryOp::GeluTanh => {
                const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
            }
            UnaryOp::GeluErf => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        }
    }
}

/// Elementwise ops of two inputs (broadcasting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a · b
    Mul,
    /// a / b
    Div,
    /// max(a, b)
    Maximum,
    /// min(a, b)
    Minimum,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
    ];

    /// The op's name.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }

    /// Applies the op to two f64 values (the reference semantics; NaN propagates through
    /// maximum/minimum).
    #[inline]
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Maximum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            BinaryOp::Minimum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
        }
    }
}

/// Reductions along one dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Σ
    Sum,
    /// Σ / n
    Mean,
    /// max
    Max,
    /// min
    Min,
}

impl ReduceOp {
    /// The op's name.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}
