#!/usr/bin/env python3
"""Golden outputs for the reference ops of tempra-tensor, computed with numpy in float64.

Run from anywhere: `python3 make_op_goldens.py` rewrites the `*.json` files next to it.
`tests/reference_ops.rs` reads them; no Python runs at test time.

Every formula below is written plainly in numpy (no tempra code is consulted), so the
goldens are an independent specification of each op.

File format (one file per op family):

    {"generator": "...", "numpy": "<version>", "cases": [case, ...]}

    case = {
      "name": "exp/contig_3x5",       unique within the file
      "op": "exp",                    the ExecContext method the test calls
      "inputs": {"x": input, ...},    named inputs (see below)
      "params": {...},                op parameters (dim, keepdim, eps, rope config, ...)
      "expected": {"shape": [...], "data": [...]},   row-major, float64
      "modes": ["f64", "f32"],        optional: compute dtypes to run in (default both)
      "out_dtype": "f32",             optional: expected output dtype (default: the mode's)
      "quant": true                   optional: needs the real quant module (Q8_0)
    }

    input = {
      "shape": [...], "data": [...],  the base tensor, row-major
      "dtype": "f16",                 optional fixed dtype (f64, f32, f16, bf16, u32, q8_0);
                                      without it the tensor takes the mode's dtype
      "views": [["t"], ["narrow", dim, start, len], ...]   optional, applied in order
    }

Views: ["t"] swaps the last two dims; ["transpose", d0, d1]; ["permute", p0, p1, ...];
["narrow", dim, start, len]; ["broadcast", d0, d1, ...]; ["select", dim, index];
["unsqueeze", dim]; ["squeeze", dim]; ["reshape", d0, d1, ...].

Inputs are rounded to 6 decimals (short JSON); the goldens are computed from exactly the
stored values. Inputs whose dtype is fixed to f16/bf16/f32/q8_0 are stored already
rounded to that dtype, so every mode reads them exactly.
"""

import json
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NUMPY_VERSION = np.__version__

# ------------------------------------------------------------------------------------------
# helpers


def rng_for(family):
    """A generator seeded per family, so adding cases to one file leaves the others alone."""
    seed = sum(ord(c) * 131**i for i, c in enumerate(family)) % (2**32)
    return np.random.default_rng(seed)


def r6(a):
    return np.round(np.asarray(a, dtype=np.float64), 6)


def to_f16(a):
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def to_f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def to_bf16(a):
    """Round-to-nearest-even from float32 to bfloat16 (inputs are finite)."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16) << 16
    return out.astype(np.uint32).view(np.float32).astype(np.float64)


def q8_0_dequant(w):
    """ggml's quantize_row_q8_0_ref then dequantize_row_q8_0, over rows of 32 (float32)."""
    x = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(x), axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, np.float32(1.0)), np.float32(0.0))
    v = (x * inv.astype(np.float32)[:, None]).astype(np.float32).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)  # roundf: half away from zero
    dh = d.astype(np.float16).astype(np.float64)
    return (q * dh[:, None]).reshape(np.shape(w))


def apply_views(a, views):
    for v in views or []:
        kind, args = v[0], v[1:]
        if kind == "t":
            a = np.swapaxes(a, -1, -2)
        elif kind == "transpose":
            a = np.swapaxes(a, args[0], args[1])
        elif kind == "permute":
            a = np.transpose(a, args)
        elif kind == "narrow":
            dim, start, length = args
            index = [slice(None)] * a.ndim
            index[dim] = slice(start, start + length)
            a = a[tuple(index)]
        elif kind == "broadcast":
            a = np.broadcast_to(a, args)
        elif kind == "select":
            a = np.take(a, args[1], axis=args[0])
        elif kind == "unsqueeze":
            a = np.expand_dims(a, args[0])
        elif kind == "squeeze":
            a = np.squeeze(a, axis=args[0])
        elif kind == "reshape":
            a = np.reshape(a, args)
        else:
            raise ValueError(kind)
    return a


def flat(a):
    a = np.asarray(a, dtype=np.float64)
    assert np.all(np.isfinite(a)), "goldens must be finite"
    return [float(v) for v in a.ravel()]


def inp(data, dtype=None, views=None):
    """An input spec and the numpy value the op sees (after views)."""
    data = np.asarray(data, dtype=np.float64)
    spec = {"shape": list(data.shape), "data": flat(data)}
    if dtype is not None:
        spec["dtype"] = dtype
        if dtype == "u32":
            spec["data"] = [int(v) for v in data.ravel()]
    if views:
        spec["views"] = views
    value = data
    if dtype == "q8_0":
        value = q8_0_dequant(data)
    return spec, apply_views(value, views)


def case(name, op, inputs, expected, params=None, **extra):
    c = {"name": name, "op": op, "inputs": inputs, "params": params or {}}
    expected = np.asarray(expected, dtype=np.float64)
    c["expected"] = {"shape": list(expected.shape), "data": flat(expected)}
    c.update(extra)
    return c


def write(family, cases):
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names in " + family
    path = os.path.join(HERE, family + ".json")
    header = {"generator": "make_op_goldens.py", "numpy": NUMPY_VERSION}
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases)
    head = json.dumps(header, separators=(",", ":"))[:-1]
    with open(path, "w") as f:
        f.write(head + ',"cases":[\n' + body + "\n]}\n")
    print(f"{family}.json: {len(cases)} cases, {os.path.getsize(path)} bytes")


# ------------------------------------------------------------------------------------------
# unary

ERF = np.vectorize(math.erf, otypes=[np.float64])

UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sqr": lambda x: x * x,
    "recip": lambda x: 1.0 / x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_erf": lambda x: 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0))),
}


def unary_domain(rng, op, shape):
    if op in ("log", "sqrt", "rsqrt"):
        return r6(rng.uniform(0.1, 4.0, shape))
    if op == "recip":
        return r6(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 3.0, shape))
    if op == "exp":
        return r6(rng.uniform(-4.0, 4.0, shape))
    x = r6(rng.normal(0.0, 2.0, shape))
    if op in ("relu", "abs", "gelu", "gelu_erf", "silu", "neg", "sqr"):
        x.ravel()[0] = 0.0  # the kink / zero
    return x


def gen_unary():
    rng = rng_for("unary")
    cases = []
    for op, f in UNARY.items():
        x = unary_domain(rng, op, (3, 5))
        s, v = inp(x)
        cases.append(case(f"{op}/3x5", op, {"x": s}, f(v)))
        x = unary_domain(rng, op, (7,))
        s, v = inp(x)
        cases.append(case(f"{op}/7", op, {"x": s}, f(v)))
        x = unary_domain(rng, op, (5, 3))
        s, v = inp(x, views=[["t"]])
        cases.append(case(f"{op}/transposed_5x3", op, {"x": s}, f(v)))
    for op in ("exp", "gelu_erf", "sigmoid"):
        x = unary_domain(rng, op, (1, 4))
        s, v = inp(x, views=[["broadcast", 3, 4]])
        cases.append(case(f"{op}/broadcast_1x4_to_3x4", op, {"x": s}, UNARY[op](v)))
        x = unary_domain(rng, op, (6, 5))
        s, v = inp(x, views=[["narrow", 0, 2, 3], ["narrow", 1, 1, 3]])
        cases.append(case(f"{op}/narrow_rows_cols", op, {"x": s}, UNARY[op](v)))
    # a scalar (rank 0) and a 1-element tensor
    s, v = inp(np.array(0.75))
    cases.append(case("tanh/scalar", "tanh", {"x": s}, np.tanh(v)))
    s, v = inp(np.array([[-1.5]]))
    cases.append(case("gelu_erf/1x1", "gelu_erf", {"x": s}, UNARY["gelu_erf"](v)))
    # gelu on larger magnitudes (tails)
    s, v = inp(np.array([-8.0, -5.5, -3.0, 3.0, 5.5, 8.0]))
    cases.append(case("gelu/tails", "gelu", {"x": s}, UNARY["gelu"](v)))
    cases.append(case("gelu_erf/tails", "gelu_erf", {"x": s}, UNARY["gelu_erf"](v)))
    write("unary", cases)


# ------------------------------------------------------------------------------------------
# binary

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def binary_rhs(rng, op, shape):
    if op == "div":
        return r6(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape))
    return r6(rng.normal(0.0, 1.5, shape))


def gen_binary():
    rng = rng_for("binary")
    cases = []
    for op, f in BINARY.items():
        shapes = [
            ("same_3x5", (3, 5), (3, 5)),
            ("bcast_3x1_5", (3, 1), (5,)),
            ("bcast_2x3x4_4", (2, 3, 4), (4,)),
            ("bcast_1_4x3", (1,), (4, 3)),
            ("bcast_2x1x3_1x5x1", (2, 1, 3), (1, 5, 1)),
            ("odd_1x7", (1, 7), (1, 7)),
        ]
        for label, sa, sb in shapes:
            a = r6(rng.normal(0.0, 1.5, sa))
            b = binary_rhs(rng, op, sb)
            (sa_, va), (sb_, vb) = inp(a), inp(b)
            cases.append(case(f"{op}/{label}", op, {"a": sa_, "b": sb_}, f(va, vb)))
        # views: a transposed, b explicitly broadcast (stride 0)
        a = r6(rng.normal(0.0, 1.5, (5, 3)))
        b = binary_rhs(rng, op, (1, 5))
        (sa_, va), (sb_, vb) = inp(a, views=[["t"]]), inp(b, views=[["broadcast", 3, 5]])
        cases.append(case(f"{op}/views_t_and_broadcast", op, {"a": sa_, "b": sb_}, f(va, vb)))
        # views: narrowed rows and a permuted rhs
        a = r6(rng.normal(0.0, 1.5, (5, 4)))
        b = binary_rhs(rng, op, (4, 3))
        (sa_, va), (sb_, vb) = inp(a, views=[["narrow", 0, 1, 3]]), inp(b, views=[["t"]])
        cases.append(case(f"{op}/views_narrow_and_t", op, {"a": sa_, "b": sb_}, f(va, vb)))
    # maximum/minimum with ties and signed zeros
    a = np.array([1.0, -2.0, 3.5, 0.0, -0.5])
    b = np.array([1.0, -2.0, 3.0, 0.0, -0.25])
    for op in ("maximum", "minimum"):
        (sa_, va), (sb_, vb) = inp(a), inp(b)
        cases.append(case(f"{op}/ties", op, {"a": sa_, "b": sb_}, BINARY[op](va, vb)))
    # scalar variants
    x = r6(rng.normal(0.0, 1.5, (3, 5)))
    for op, s in (("add_scalar", 0.625), ("mul_scalar", -1.75), ("div_scalar", 3.0)):
        sx, vx = inp(x)
        fn = {"add_scalar": np.add, "mul_scalar": np.multiply, "div_scalar": np.divide}[op]
        cases.append(case(f"{op}/3x5", op, {"x": sx}, fn(vx, s), {"scalar": s}))
        sx, vx = inp(r6(rng.normal(0.0, 1.5, (5, 3))), views=[["t"]])
        cases.append(case(f"{op}/transposed", op, {"x": sx}, fn(vx, s), {"scalar": s}))
    for bop, s in (("sub", 0.5), ("maximum", 0.25), ("minimum", -0.3), ("div", -0.8)):
        sx, vx = inp(r6(rng.normal(0.0, 1.5, (2, 7))))
        cases.append(
            case(f"binary_scalar/{bop}", "binary_scalar", {"x": sx}, BINARY[bop](vx, s), {"op": bop, "scalar": s})
        )
    # add_inplace: the in-place path (same shape, unique, contiguous) and the fallback
    for label, sa, sb in (("inplace_3x5_plus_5", (3, 5), (5,)), ("fallback_1x5_plus_3x5", (1, 5), (3, 5))):
        (sa_, va), (sb_, vb) = inp(r6(rng.normal(0.0, 1.5, sa))), inp(r6(rng.normal(0.0, 1.5, sb)))
        cases.append(case(f"add_inplace/{label}", "add_inplace", {"a": sa_, "b": sb_}, va + vb))
    write("binary", cases)


# ------------------------------------------------------------------------------------------
# reductions

REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def gen_reduce():
    rng = rng_for("reduce")
    cases = []
    x = r6(rng.normal(0.0, 2.0, (3, 4, 5)))
    for op, f in REDUCE.items():
        for dim in range(3):
            for keepdim in (False, True):
                s, v = inp(x)
                cases.append(
                    case(
                        f"{op}/3x4x5_dim{dim}_keep{int(keepdim)}",
                        op,
                        {"x": s},
                        f(v, axis=dim, keepdims=keepdim),
                        {"dim": dim, "keepdim": keepdim},
                    )
                )
        for label, shape, dim, views in (
            ("1x7_dim1", (1, 7), 1, None),
            ("7_dim0", (7,), 0, None),
            ("5x1_dim1", (5, 1), 1, None),
            ("transposed_4x3_dim1", (4, 3), 1, [["t"]]),
            ("permuted_2x3x4_dim0", (2, 3, 4), 0, [["permute", 2, 0, 1]]),
            ("broadcast_dim0", (1, 5), 0, [["broadcast", 3, 5]]),
        ):
            s, v = inp(r6(rng.normal(0.0, 2.0, shape)), views=views)
            cases.append(case(f"{op}/{label}", op, {"x": s}, f(v, axis=dim), {"dim": dim, "keepdim": False}))
    # argmax, including ties (the first index wins)
    ties = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -0.5, -0.5, -2.0]])
    for dim in (0, 1):
        for keepdim in (False, True):
            s, v = inp(ties)
            cases.append(
                case(
                    f"argmax/ties_dim{dim}_keep{int(keepdim)}",
                    "argmax",
                    {"x": s},
                    np.argmax(v, axis=dim, keepdims=keepdim),
                    {"dim": dim, "keepdim": keepdim},
                    out_dtype="u32",
                )
            )
    for dim in range(3):
        s, v = inp(x)
        cases.append(
            case(
                f"argmax/3x4x5_dim{dim}", "argmax", {"x": s}, np.argmax(v, axis=dim), {"dim": dim, "keepdim": False},
                out_dtype="u32",
            )
        )
    s, v = inp(r6(rng.normal(0.0, 2.0, (5, 3))), views=[["t"]])
    cases.append(
        case("argmax/transposed_dim1", "argmax", {"x": s}, np.argmax(v, axis=1), {"dim": 1, "keepdim": False}, out_dtype="u32")
    )
    # sum_all
    s, v = inp(x)
    cases.append(case("sum_all/3x4x5", "sum_all", {"x": s}, np.sum(v)))
    s, v = inp(r6(rng.normal(0.0, 2.0, (5, 3))), views=[["t"]])
    cases.append(case("sum_all/transposed", "sum_all", {"x": s}, np.sum(v)))
    s, v = inp(np.array([2.5]))
    cases.append(case("sum_all/one", "sum_all", {"x": s}, np.sum(v)))
    write("reduce", cases)


# ------------------------------------------------------------------------------------------
# softmax


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def log_softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def gen_softmax():
    rng = rng_for("softmax")
    cases = []
    for op, f in (("softmax", softmax), ("log_softmax", log_softmax)):
        for label, shape, views, shift in (
            ("3x7", (3, 7), None, 0.0),
            ("1x1", (1, 1), None, 0.0),
            ("5", (5,), None, 0.0),
            ("2x3x5", (2, 3, 5), None, 0.0),
            ("shifted_by_50", (2, 6), None, 50.0),
            ("transposed_7x3", (7, 3), [["t"]], 0.0),
            ("narrow_cols", (3, 9), [["narrow", 1, 2, 5]], 0.0),
        ):
            s, v = inp(r6(rng.normal(0.0, 2.0, shape) + shift), views=views)
            cases.append(case(f"{op}/{label}", op, {"x": s}, f(v)))
    write("softmax", cases)


# ------------------------------------------------------------------------------------------
# matmul


def gen_matmul():
    rng = rng_for("matmul")
    cases = []

    def mm(label, sa, sb, va=None, vb=None, dtype_a=None, dtype_b=None, rounder=None):
        a = r6(rng.normal(0.0, 1.0, sa))
        b = r6(rng.normal(0.0, 1.0, sb))
        if rounder is not None:
            a, b = rounder[0](a), rounder[1](b)
        (sa_, a_), (sb_, b_) = inp(a, dtype_a, va), inp(b, dtype_b, vb)
        extra = {}
        if dtype_a or dtype_b:
            extra = {"modes": ["f32"], "out_dtype": "f32"}
        cases.append(case(f"matmul/{label}", "matmul", {"a": sa_, "b": sb_}, np.matmul(a_, b_), **extra))

    mm("3x5_5x7", (3, 5), (5, 7))
    mm("1x1_1x1", (1, 1), (1, 1))
    mm("1x3_3x1", (1, 3), (3, 1))
    mm("7x1_1x5", (7, 1), (1, 5))
    mm("batched_2x3x4_2x4x5", (2, 3, 4), (2, 4, 5))
    mm("bcast_batch_2x1x3x4_3x4x2", (2, 1, 3, 4), (3, 4, 2))
    mm("bcast_rank2_3x4_2x4x5", (3, 4), (2, 4, 5))
    mm("transposed_a", (5, 3), (5, 7), va=[["t"]])
    mm("transposed_b", (3, 5), (7, 5), vb=[["t"]])
    mm("transposed_both", (5, 3), (7, 5), va=[["t"]], vb=[["t"]])
    mm("narrow_rows_a_narrow_cols_b", (6, 5), (5, 9), va=[["narrow", 0, 1, 3]], vb=[["narrow", 1, 2, 4]])
    mm("permuted_batch_a", (3, 2, 4), (2, 4, 5), va=[["permute", 1, 0, 2]])
    mm("broadcast_view_b", (2, 3, 4), (4, 5), vb=[["broadcast", 2, 4, 5]])
    mm("f16_f16", (3, 5), (5, 7), dtype_a="f16", dtype_b="f16", rounder=(to_f16, to_f16))
    mm("bf16_bf16", (3, 5), (5, 7), dtype_a="bf16", dtype_b="bf16", rounder=(to_bf16, to_bf16))
    mm("f32_f16", (2, 3, 4), (4, 5), dtype_a="f32", dtype_b="f16", rounder=(to_f32, to_f16))
    mm("bf16_f32_transposed", (5, 3), (5, 7), va=[["t"]], dtype_a="bf16", dtype_b="f32", rounder=(to_bf16, to_f32))
    mm("f16_bf16", (1, 7), (7, 3), dtype_a="f16", dtype_b="bf16", rounder=(to_f16, to_bf16))
    write("matmul", cases)


# ------------------------------------------------------------------------------------------
# linear


def gen_linear():
    rng = rng_for("linear")
    cases = []

    def lin(label, sx, n, vx=None, w_views=None, bias=True, w_dtype=None, b_views=None):
        k = sx[-1] if not vx else apply_views(np.zeros(sx), vx).shape[-1]
        x = r6(rng.normal(0.0, 1.0, sx))
        w_shape = (k, n) if w_views == [["t"]] else (n, k)
        w = r6(rng.normal(0.0, 0.5, w_shape))
        if w_dtype == "f16":
            w = to_f16(w)
        elif w_dtype == "bf16":
            w = to_bf16(w)
        elif w_dtype == "q8_0":
            w = to_f32(w)
        sx_, xv = inp(x, views=vx)
        sw_, wv = inp(w, w_dtype, w_views)
        inputs = {"x": sx_, "w": sw_}
        y = xv @ wv.T
        if bias:
            b_shape = (n + 2,) if b_views else (n,)
            sb_, bv = inp(r6(rng.normal(0.0, 1.0, b_shape)), views=b_views)
            inputs["bias"] = sb_
            y = y + bv
        extra = {}
        if w_dtype:
            extra = {"modes": ["f32"], "out_dtype": "f32"}
            if w_dtype == "q8_0":
                extra["quant"] = True
        cases.append(case(f"linear/{label}", "linear", inputs, y, **extra))

    lin("3x5_w4x5_bias", (3, 5), 4)
    lin("3x5_w4x5_nobias", (3, 5), 4, bias=False)
    lin("rank1_x5_w3x5", (5,), 3)
    lin("rank3_2x3x5_w7x5", (2, 3, 5), 7)
    lin("1x1_w1x1", (1, 1), 1)
    lin("narrow_rows_x", (4, 5), 3, vx=[["narrow", 0, 1, 2]])
    lin("transposed_x", (5, 3), 4, vx=[["t"]])
    lin("transposed_w", (3, 5), 4, w_views=[["t"]])
    lin("narrow_bias", (3, 5), 4, b_views=[["narrow", 0, 1, 4]])
    lin("f16_weight", (3, 5), 4, w_dtype="f16")
    lin("f16_weight_nobias_rank3", (2, 2, 7), 3, w_dtype="f16", bias=False)
    lin("bf16_weight_narrow_rows_x", (4, 6), 5, vx=[["narrow", 0, 1, 2]], w_dtype="bf16")
    lin("q8_0_weight", (3, 64), 4, w_dtype="q8_0")
    lin("q8_0_weight_nobias", (2, 32), 3, w_dtype="q8_0", bias=False)
    write("linear", cases)


# ------------------------------------------------------------------------------------------
# norms


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * w
    return y if b is None else y + b


def gen_norm():
    rng = rng_for("norm")
    cases = []
    for label, shape, views, eps, w_dtype in (
        ("3x7", (3, 7), None, 1e-5, None),
        ("1x5", (1, 5), None, 1e-6, None),
        ("2x3x4", (2, 3, 4), None, 1e-5, None),
        ("9", (9,), None, 0.0, None),
        ("transposed_7x3", (7, 3), [["t"]], 1e-5, None),
        ("narrow_rows", (5, 6), [["narrow", 0, 1, 3]], 1e-5, None),
        ("f16_weight", (3, 8), None, 1e-5, "f16"),
        ("big_eps", (2, 5), None, 0.5, None),
    ):
        d = apply_views(np.zeros(shape), views).shape[-1]
        x = r6(rng.normal(0.3, 1.5, shape))
        w = r6(rng.normal(1.0, 0.3, (d,)))
        b = r6(rng.normal(0.0, 0.5, (d,)))
        if w_dtype == "f16":
            w, b = to_f16(w), to_f16(b)
        sx, xv = inp(x, views=views)
        sw, wv = inp(w, w_dtype)
        sb, bv = inp(b, w_dtype)
        cases.append(case(f"rms_norm/{label}", "rms_norm", {"x": sx, "w": sw}, rms_norm(xv, wv, eps), {"eps": eps}))
        cases.append(
            case(f"layer_norm/{label}", "layer_norm", {"x": sx, "w": sw, "b": sb}, layer_norm(xv, wv, bv, eps), {"eps": eps})
        )
        if label in ("3x7", "transposed_7x3"):
            cases.append(
                case(
                    f"layer_norm/{label}_nobias", "layer_norm", {"x": sx, "w": sw}, layer_norm(xv, wv, None, eps), {"eps": eps}
                )
            )
    write("norm", cases)


# ------------------------------------------------------------------------------------------
# rope


def llama3_scale(freqs, factor, low_freq_factor, high_freq_factor, old_context_len):
    """Meta's `apply_scaling` (llama-models, Llama 3.1), element by element."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            new_freqs.append((1 - smooth) * freq / factor + smooth * freq)
    return np.array(new_freqs)


def rope_ref(x, positions, rotary_dims, theta, style, scaling, freq_factors, inverse=False):
    """x [..., T, H, D], positions [T]; `inverse` rotates by the opposite angle."""
    half = rotary_dims // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = theta ** (-2.0 * i / rotary_dims)
    if scaling["kind"] == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif scaling["kind"] == "llama3":
        inv_freq = llama3_scale(
            inv_freq, scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"],
            scaling["original_max_position"],
        )
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, half]
    if inverse:
        angle = -angle
    cos = np.cos(angle)[:, None, :]  # [T, 1, half] broadcasts over heads
    sin = np.sin(angle)[:, None, :]
    if style == "interleaved":
        ia, ib = 2 * np.arange(half), 2 * np.arange(half) + 1
    else:
        ia, ib = np.arange(half), np.arange(half) + half
    out = np.array(x, dtype=np.float64, copy=True)
    xa, xb = x[..., ia], x[..., ib]
    out[..., ia] = xa * cos - xb * sin
    out[..., ib] = xa * sin + xb * cos
    return out


def gen_rope():
    rng = rng_for("rope")
    cases = []
    none = {"kind": "none"}
    llama3 = {"kind": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position": 8192.0}
    specs = [
        # label, x shape, views, positions, rotary_dims, theta, scaling, freq factors
        ("t3_h2_d8", (3, 2, 8), None, [0, 1, 2], 8, 10000.0, none, False),
        ("t1_h1_d2", (1, 1, 2), None, [5], 2, 10000.0, none, False),
        ("partial_rd4_d6", (3, 3, 6), None, [4, 9, 1], 4, 10000.0, none, False),
        ("batched_2x3x2x8", (2, 3, 2, 8), None, [7, 0, 130], 8, 10000.0, none, False),
        ("linear_x2", (3, 2, 8), None, [3, 17, 1000], 8, 10000.0, {"kind": "linear", "factor": 2.0}, False),
        ("llama3_d16", (3, 1, 16), None, [0, 513, 70000], 16, 500000.0, llama3, False),
        ("freq_factors", (2, 2, 8), None, [11, 400], 8, 10000.0, none, True),
        ("view_transposed_h_t", (2, 3, 8), [["transpose", 0, 1]], [2, 5, 8], 8, 1000000.0, none, False),
        ("partial_rd2_d5_big_pos", (2, 1, 5), None, [32767, 65536], 2, 10000.0, none, False),
    ]
    for style in ("interleaved", "neox"):
        for label, shape, views, positions, rd, theta, scaling, with_ff in specs:
            x = r6(rng.normal(0.0, 1.0, shape))
            sx, xv = inp(x, views=views)
            t = xv.shape[-3]
            pos = np.array(positions, dtype=np.float64)
            assert len(pos) == t
            sp, _ = inp(pos, "u32")
            inputs = {"x": sx, "positions": sp}
            ff = None
            if with_ff:
                ff = to_f32(rng.uniform(1.0, 8.0, (rd // 2,)))
                inputs["freq_factors"], _ = inp(ff, "f32")
            params = {"rotary_dims": rd, "theta": theta, "style": style, "scaling": scaling}
            cases.append(case(f"rope/{style}/{label}", "rope", inputs, rope_ref(xv, pos, rd, theta, style, scaling, ff), params))
            if label in ("t3_h2_d8", "partial_rd4_d6", "llama3_d16", "freq_factors", "view_transposed_h_t"):
                expected = rope_ref(xv, pos, rd, theta, style, scaling, ff, inverse=True)
                cases.append(case(f"rope_inverse/{style}/{label}", "rope_inverse", inputs, expected, params))
    # positions given as a narrowed view
    x = r6(rng.normal(0.0, 1.0, (3, 2, 6)))
    pos = np.array([9, 3, 4, 12, 6], dtype=np.float64)
    sx, xv = inp(x)
    sp, pv = inp(pos, "u32", [["narrow", 0, 1, 3]])
    cases.append(
        case("rope/neox/positions_view", "rope", {"x": sx, "positions": sp},
             rope_ref(xv, pv, 6, 10000.0, "neox", none, None),
             {"rotary_dims": 6, "theta": 10000.0, "style": "neox", "scaling": none})
    )
    write("rope", cases)


# ------------------------------------------------------------------------------------------
# embedding


def gen_embedding():
    rng = rng_for("embedding")
    cases = []

    def emb(label, table, ids, t_dtype=None, t_views=None, i_views=None, **extra):
        st, tv = inp(table, t_dtype, t_views)
        si, iv = inp(np.array(ids, dtype=np.float64), "u32", i_views)
        expected = tv[np.asarray(iv, dtype=np.int64)]
        cases.append(case(f"embedding/{label}", "embedding", {"table": st, "ids": si}, expected, **extra))

    emb("v7_d5", r6(rng.normal(0.0, 1.0, (7, 5))), [3, 0, 6, 3])
    emb("ids_2x3", r6(rng.normal(0.0, 1.0, (7, 5))), [[1, 2, 2], [6, 0, 5]])
    emb("v1_d1", r6(rng.normal(0.0, 1.0, (1, 1))), [0, 0])
    emb("one_id", r6(rng.normal(0.0, 1.0, (4, 3))), [2])
    emb("narrow_cols_table", r6(rng.normal(0.0, 1.0, (6, 7))), [5, 1, 4], t_views=[["narrow", 1, 1, 5]])
    emb("transposed_ids", r6(rng.normal(0.0, 1.0, (5, 4))), [[0, 1, 2], [4, 3, 3]], i_views=[["t"]])
    emb("f16_table", to_f16(r6(rng.normal(0.0, 1.0, (5, 6)))), [4, 0, 2], t_dtype="f16",
        modes=["f32"], out_dtype="f32")
    emb("q8_0_table", to_f32(r6(rng.normal(0.0, 1.0, (3, 32)))), [2, 0], t_dtype="q8_0",
        modes=["f32"], out_dtype="f32", quant=True)
    write("embedding", cases)


# ------------------------------------------------------------------------------------------
# attention


def attention_ref(q, k, v, scale, q_start, window, softcap, sinks=None):
    """q [..., Tq, Hq, D], k [..., Tk, Hkv, D], v [..., Tk, Hkv, Dv]; sinks [Hq]: one more
    logit per head in each row's softmax, dropped before the values (gpt-oss, as
    transformers' eager attention writes it)."""
    tq, hq, _ = q.shape[-3:]
    tk, hkv, _ = k.shape[-3:]
    dv = v.shape[-1]
    group = hq // hkv
    out = np.zeros(q.shape[:-3] + (tq, hq, dv))
    qpos = q_start + np.arange(tq)[:, None]
    kpos = np.arange(tk)[None, :]
    mask = kpos <= qpos
    if window is not None:
        mask &= (qpos - kpos) < window
    assert mask.any(axis=1).all(), "every query must see a key"
    for h in range(hq):
        kvh = h // group
        s = scale * np.matmul(q[..., :, h, :], np.swapaxes(k[..., :, kvh, :], -1, -2))  # [..., Tq, Tk]
        if softcap is not None:
            s = softcap * np.tanh(s / softcap)
        s = np.where(mask, s, -np.inf)
        if sinks is not None:
            column = np.full(s.shape[:-1] + (1,), sinks[h])
            s = np.concatenate([s, column], axis=-1)
        p = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = p / np.sum(p, axis=-1, keepdims=True)
        if sinks is not None:
            p = p[..., :-1]
        out[..., :, h, :] = np.matmul(p, v[..., :, kvh, :])
    return out


def gen_attention():
    rng = rng_for("attention")
    cases = []
    specs = [
        # label, lead, tq, tk, hq, hkv, d, dv, q_start, window, softcap, scale, kv dtype, views
        ("causal_t4_h2_d8", (), 4, 4, 2, 2, 8, 8, 0, None, None, None, None, None),
        ("gqa_hq4_hkv2_qstart2", (), 3, 5, 4, 2, 4, 4, 2, None, None, None, None, None),
        ("window3", (), 5, 5, 2, 1, 4, 4, 0, 3, None, None, None, None),
        ("softcap5", (), 3, 3, 1, 1, 6, 6, 0, None, 5.0, 1.0, None, None),
        ("batched_dv3", (2,), 3, 3, 2, 2, 4, 3, 0, None, None, None, None, None),
        ("decode_mqa_window4", (), 1, 7, 3, 1, 5, 5, 6, 4, None, None, None, None),
        ("prefill_chunk_qstart3_window4_softcap", (), 2, 5, 2, 2, 4, 2, 3, 4, 2.5, 0.75, None, None),
        ("tq1_tk1", (), 1, 1, 1, 1, 1, 1, 0, None, None, None, None, None),
        ("views", (), 3, 4, 2, 1, 4, 3, 1, None, None, None, None, "views"),
        ("f16_kv", (), 3, 4, 4, 2, 8, 8, 1, None, None, None, "f16", None),
        ("f16_kv_batched_window", (2,), 2, 4, 2, 1, 4, 4, 2, 2, None, None, "f16", None),
    ]
    for label, lead, tq, tk, hq, hkv, d, dv, q_start, window, softcap, scale, kv_dtype, views in specs:
        if scale is None:
            scale = 1.0 / math.sqrt(d)
        scale = float(np.float32(scale))  # AttentionParams.scale is an f32
        q = r6(rng.normal(0.0, 1.0, lead + (tq, hq, d)))
        if softcap is not None:
            q = r6(q * 3.0)  # scores large enough that the cap bends them
        if views == "views":
            # q and k stored [H, T, D] and transposed to [T, H, D]; v narrowed along Dv
            sq, qv = inp(q.swapaxes(-2, -3).copy(), views=[["transpose", 0, 1]])
            sk, kv = inp(r6(rng.normal(0.0, 1.0, (hkv, tk, d))), views=[["transpose", 0, 1]])
            sv, vv = inp(r6(rng.normal(0.0, 1.0, (tk, hkv, dv + 2))), views=[["narrow", 2, 1, dv]])
        else:
            k = r6(rng.normal(0.0, 1.0, lead + (tk, hkv, d)))
            v = r6(rng.normal(0.0, 1.0, lead + (tk, hkv, dv)))
            if kv_dtype == "f16":
                k, v = to_f16(k), to_f16(v)
            sq, qv = inp(q)
            sk, kv = inp(k, kv_dtype)
            sv, vv = inp(v, kv_dtype)
        params = {"scale": scale, "q_start": q_start, "window": window, "softcap": softcap}
        extra = {"modes": ["f32"], "out_dtype": "f32"} if kv_dtype else {}
        cases.append(
            case(f"attention/{label}", "attention", {"q": sq, "k": sk, "v": sv},
                 attention_ref(qv, kv, vv, scale, q_start, window, softcap), params, **extra)
        )
    # Attention sinks (f32, as models store them): prefill with GQA and a window, decode.
    for label, tq, tk, hq, hkv, d, q_start, window in (
        ("sinks_gqa_window3", 5, 5, 4, 2, 4, 0, 3),
        ("sinks_decode", 1, 6, 2, 1, 8, 5, None),
    ):
        scale = float(np.float32(1.0 / math.sqrt(d)))
        q = r6(rng.normal(0.0, 1.0, (tq, hq, d)))
        k = r6(rng.normal(0.0, 1.0, (tk, hkv, d)))
        v = r6(rng.normal(0.0, 1.0, (tk, hkv, d)))
        sinks = to_f32(r6(rng.normal(0.0, 2.0, (hq,))))
        params = {"scale": scale, "q_start": q_start, "window": window, "softcap": None}
        cases.append(
            case(f"attention/{label}", "attention",
                 {"q": inp(q)[0], "k": inp(k)[0], "v": inp(v)[0], "sinks": inp(sinks, "f32")[0]},
                 attention_ref(q, k, v, scale, q_start, window, None, sinks), params)
        )
    write("attention", cases)


# ------------------------------------------------------------------------------------------
# structural: contiguous over every view kind, concat, cast, write_slice, creation


def gen_structural():
    rng = rng_for("structural")
    cases = []
    base = r6(rng.normal(0.0, 1.0, (2, 3, 4)))
    for label, views in (
        ("t", [["t"]]),
        ("transpose_0_2", [["transpose", 0, 2]]),
        ("permute_2_0_1", [["permute", 2, 0, 1]]),
        ("narrow_1_1_2", [["narrow", 1, 1, 2]]),
        ("narrow_2_3_1", [["narrow", 2, 3, 1]]),
        ("select_1_2", [["select", 1, 2]]),
        ("unsqueeze_1_broadcast", [["unsqueeze", 1], ["broadcast", 2, 3, 3, 4]]),
        ("narrow_squeeze", [["narrow", 0, 1, 1], ["squeeze", 0]]),
        ("reshape_6x4_t", [["reshape", 6, 4], ["t"]]),
        ("broadcast_new_lead", [["broadcast", 2, 2, 3, 4]]),
        ("permute_then_narrow", [["permute", 1, 2, 0], ["narrow", 1, 1, 2]]),
    ):
        s, v = inp(base, views=views)
        cases.append(case(f"contiguous/{label}", "contiguous", {"x": s}, v))
    # concat
    for label, shapes, dim, views in (
        ("dim0_3_parts", [(1, 3), (2, 3), (3, 3)], 0, [None, None, None]),
        ("dim1_odd", [(2, 1), (2, 5), (2, 3)], 1, [None, None, None]),
        ("dim2_rank3", [(2, 2, 3), (2, 2, 1)], 2, [None, None]),
        ("one_part", [(3, 2)], 0, [None]),
        ("views", [(3, 2), (4, 3), (1, 3)], 0, [[["t"]], [["narrow", 0, 1, 2]], [["broadcast", 3, 3]]]),
    ):
        inputs, values = {}, []
        for i, (shape, vw) in enumerate(zip(shapes, views)):
            s, v = inp(r6(rng.normal(0.0, 1.0, shape)), views=vw)
            inputs[f"p{i}"] = s
            values.append(v)
        cases.append(case(f"concat/{label}", "concat", inputs, np.concatenate(values, axis=dim), {"dim": dim}))
    # cast (inputs f32-representable, so both modes read them exactly; expected: rounded)
    x = to_f32(r6(rng.normal(0.0, 3.0, (3, 5))))
    for target, rounder in (("f16", to_f16), ("bf16", to_bf16), ("f32", to_f32), ("f64", lambda a: a)):
        s, v = inp(x)
        cases.append(case(f"cast/to_{target}", "cast", {"x": s}, rounder(v), {"dtype": target}, out_dtype=target))
    s, v = inp(x, views=[["t"]])
    cases.append(case("cast/transposed_to_f16", "cast", {"x": s}, to_f16(v), {"dtype": "f16"}, out_dtype="f16"))
    s, v = inp(to_f16(x), "f16")
    cases.append(case("cast/from_f16", "cast", {"x": s}, v, {"dtype": "mode"}))
    # write_slice: dst (unique, contiguous) gets src written into a region along dim
    for label, dst_shape, src_shape, dim, start, src_views, src_dtype in (
        ("dim0_start1", (5, 3), (2, 3), 0, 1, None, None),
        ("dim1_start2", (3, 6), (3, 3), 1, 2, None, None),
        ("dim1_rank3_src_t", (2, 5, 4), (2, 4, 2), 1, 3, [["transpose", 1, 2]], None),
        ("whole", (2, 2), (2, 2), 0, 0, None, None),
        ("src_f16_converted", (4, 3), (2, 3), 0, 2, None, "f16"),
    ):
        dst = r6(rng.normal(0.0, 1.0, dst_shape))
        sd, dv = inp(dst)
        src = r6(rng.normal(0.0, 1.0, src_shape))
        if src_dtype == "f16":
            src = to_f16(src)
        ss, sv = inp(src, src_dtype, src_views)
        expected = np.array(dv, copy=True)
        index = [slice(None)] * expected.ndim
        index[dim] = slice(start, start + sv.shape[dim])
        expected[tuple(index)] = sv
        cases.append(
            case(f"write_slice/{label}", "write_slice", {"dst": sd, "src": ss}, expected, {"dim": dim, "start": start})
        )
    # creation
    for label, start, end, step in (
        ("0_5_1", 0.0, 5.0, 1.0),
        ("frac", 0.5, 2.0, 0.25),
        ("negative_step", 3.0, -2.0, -1.5),
        ("empty", 2.0, 1.0, 1.0),
        ("non_multiple", 0.0, 1.0, 0.3),
    ):
        expected = np.array([start + i * step for i in range(max(0, math.ceil((end - start) / step)))])
        cases.append(case(f"arange/{label}", "arange", {}, expected, {"start": start, "end": end, "step": step}))
    cases.append(case("full/2x3", "full", {}, np.full((2, 3), -1.25), {"dims": [2, 3], "value": -1.25}))
    cases.append(case("full/scalar", "full", {}, np.full((), 7.0), {"dims": [], "value": 7.0}))
    cases.append(case("zeros/3x1x2", "zeros", {}, np.zeros((3, 1, 2)), {"dims": [3, 1, 2]}))
    write("structural", cases)


# ------------------------------------------------------------------------------------------
# mixture-of-experts ops


def top_k_ref(x, k):
    """Per row of the last dim: indices ordered by value descending, ties by lower index."""
    rows = x.reshape(-1, x.shape[-1])
    idx = np.array([sorted(range(len(r)), key=lambda i: (-r[i], i))[:k] for r in rows], dtype=np.int64)
    idx = idx.reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, idx, axis=-1), idx


def expert_linear_ref(x, w, ids, bias):
    """x [T, S, K] (S = k or 1), w [E, N, K], ids [T, k], bias [E, N] or None -> [T, k, N]."""
    t, k = ids.shape
    out = np.zeros((t, k, w.shape[1]))
    for i in range(t):
        for s in range(k):
            e = int(ids[i, s])
            row = x[i, s if x.shape[1] > 1 else 0]
            out[i, s] = w[e] @ row + (bias[e] if bias is not None else 0.0)
    return out


def gen_moe():
    rng = rng_for("moe")
    cases = []

    def topk(label, x, k, views=None):
        sx, xv = inp(x, None, views)
        values, idx = top_k_ref(xv, k)
        cases.append(case(f"top_k_values/{label}", "top_k_values", {"x": sx}, values, {"k": k}))
        cases.append(case(f"top_k_indices/{label}", "top_k_indices", {"x": sx}, idx, {"k": k},
                          out_dtype="u32"))

    # Ties (values from a small set) decide by the lower index.
    topk("ties_3x9_k4", rng.integers(-2, 3, (3, 9)).astype(np.float64), 4)
    topk("router_2x64_k8", r6(rng.normal(0.0, 1.0, (2, 64))), 8)
    topk("all_k_5", r6(rng.normal(0.0, 1.0, (5,))), 5)
    topk("transposed_7x4_k2", r6(rng.normal(0.0, 1.0, (4, 7))), 2, views=[["t"]])

    def gather(label, x, idx, views=None):
        sx, xv = inp(x, None, views)
        si, iv = inp(np.array(idx, dtype=np.float64), "u32")
        expected = np.take_along_axis(xv, np.asarray(iv, dtype=np.int64), axis=-1)
        cases.append(case(f"gather/{label}", "gather", {"x": sx, "indices": si}, expected))

    gather("2x6_k3_repeats", r6(rng.normal(0.0, 1.0, (2, 6))), [[5, 0, 5], [1, 1, 2]])
    gather("rank3", r6(rng.normal(0.0, 1.0, (2, 3, 4))), [[[3], [0], [2]], [[1], [1], [3]]])
    gather("transposed_x", r6(rng.normal(0.0, 1.0, (5, 3))), [[4, 0], [2, 2], [1, 3]], views=[["t"]])

    def wsum(label, x, weights, x_views=None):
        sx, xv = inp(x, None, x_views)
        sw, wv = inp(weights)
        expected = np.einsum("...kd,...k->...d", xv, wv)
        cases.append(case(f"weighted_sum/{label}", "weighted_sum", {"x": sx, "weights": sw}, expected))

    wsum("t3_k2_d5", r6(rng.normal(0.0, 1.0, (3, 2, 5))), r6(rng.uniform(0.0, 1.0, (3, 2))))
    wsum("t1_k8_d4", r6(rng.normal(0.0, 1.0, (1, 8, 4))), r6(rng.uniform(0.0, 1.0, (1, 8))))
    wsum("rank2", r6(rng.normal(0.0, 1.0, (3, 6))), r6(rng.uniform(0.0, 1.0, (3,))))
    wsum("transposed_x", r6(rng.normal(0.0, 1.0, (2, 4, 3))), r6(rng.uniform(0.0, 1.0, (2, 3))),
         x_views=[["transpose", 1, 2]])

    def experts(label, x, w, ids, bias=None, w_dtype=None, **extra):
        sx, xv = inp(x)
        sw, wv = inp(w, w_dtype)
        si, iv = inp(np.array(ids, dtype=np.float64), "u32")
        inputs = {"x": sx, "w": sw, "ids": si}
        bv = None
        if bias is not None:
            inputs["bias"], bv = inp(bias)
        expected = expert_linear_ref(xv, wv, np.asarray(iv, dtype=np.int64), bv)
        cases.append(case(f"expert_linear/{label}", "expert_linear", inputs, expected, **extra))

    # Expert 3 nobody chose; expert 1 twice for token 0.
    experts("t3_k2_e4", r6(rng.normal(0.0, 1.0, (3, 2, 5))), r6(rng.normal(0.0, 1.0, (4, 6, 5))),
            [[1, 1], [0, 2], [2, 0]])
    experts("broadcast_x_bias", r6(rng.normal(0.0, 1.0, (2, 1, 4))), r6(rng.normal(0.0, 1.0, (3, 5, 4))),
            [[2, 0, 1], [0, 0, 2]], bias=r6(rng.normal(0.0, 1.0, (3, 5))))
    experts("q8_0_weights", to_f32(r6(rng.normal(0.0, 1.0, (2, 2, 32)))),
            to_f32(r6(rng.normal(0.0, 1.0, (3, 4, 32)))), [[2, 0], [2, 2]], w_dtype="q8_0",
            modes=["f32"], out_dtype="f32", quant=True)
    write("moe", cases)


def main():
    print(f"numpy {NUMPY_VERSION}")
    gen_unary()
    gen_binary()
    gen_reduce()
    gen_softmax()
    gen_matmul()
    gen_linear()
    gen_norm()
    gen_rope()
    gen_embedding()
    gen_attention()
    gen_structural()
    gen_moe()
    total = sum(os.path.getsize(os.path.join(HERE, f)) for f in os.listdir(HERE) if f.endswith(".json"))
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
