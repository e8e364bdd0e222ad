"""Property tests: random compositions of primitives agree in every mode.

A small random expression generator picks operations from the op-spec
table (elementwise rows, plus shape-preserving uses of the array
primitives), nests them to depth <= 5 over a few inputs of random,
broadcast-compatible shapes (Python floats included: the C fast path), and
maps every operand into the operation's safe domain with a smooth squash
``lo + (hi - lo) * sigmoid(z)``.  For each expression: forward mode equals
central differences, reverse mode satisfies <u, J v> = <J^T u, v> with
forward mode, ``jacfwd`` equals ``jacrev``, and ``grad`` of a weighted sum
equals the pullback.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

import tapead as ta
import tapead.numpy as tnp

from opspecs import NP, AwayFromZero, ELEMENTWISE, Interval, Lattice

UNARY = [s for s in ELEMENTWISE if s.arity == 1]
BINARY = [s for s in ELEMENTWISE if s.arity == 2]
ARRAY1 = ["sum_keepdims", "mean_keepdims", "flip", "gather", "broadcast_full",
          "reshape_roundtrip", "transpose_roundtrip", "matmul_const", "concat_slice"]
ARRAY2 = ["where", "stack_sum"]
BASE_SHAPES = [(), (3,), (2, 3)]
MAX_DEPTH = 5


# ---------------------------------------------------------------------------
# the generator: trees of ("input", k) / ("const", c) / (kind, op, flip, *children)
# ---------------------------------------------------------------------------

@st.composite
def expressions(draw, n_inputs, depth=MAX_DEPTH):
    if depth == 0 or (depth < MAX_DEPTH and draw(st.integers(0, 3)) == 0):
        if draw(st.integers(0, 3)):
            return ("input", draw(st.integers(0, n_inputs - 1)))
        return ("const", draw(st.floats(-2.0, 2.0, allow_nan=False)))
    kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "array1", "array2"]))
    flip = draw(st.booleans())
    sub = expressions(n_inputs, depth - 1)
    if kind == "unary":
        return (kind, draw(st.sampled_from(UNARY)), flip, draw(sub))
    if kind == "binary":
        return (kind, draw(st.sampled_from(BINARY)), flip, draw(sub), draw(sub))
    if kind == "array1":
        return (kind, draw(st.sampled_from(ARRAY1)), flip, draw(sub))
    return (kind, draw(st.sampled_from(ARRAY2)), flip, draw(sub), draw(sub))


@st.composite
def problems(draw):
    """(expression, input shapes, seed)."""
    base = draw(st.sampled_from(BASE_SHAPES))
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        # a broadcast-compatible variant of the base shape
        shape = tuple(1 if draw(st.integers(0, 3)) == 0 else n for n in base)
        shape = shape[draw(st.integers(0, len(shape))):] if draw(st.booleans()) else shape
        shapes.append(shape)
    shapes[0] = base                     # at least one input has the base shape
    expr = draw(expressions(n_inputs))
    return expr, tuple(shapes), draw(st.integers(0, 2**32 - 1))


# ---------------------------------------------------------------------------
# evaluation against a namespace: tnp (traced) or numpy (differences)
# ---------------------------------------------------------------------------

def _bounds(dom, flip):
    if isinstance(dom, Interval):
        return dom.lo, dom.hi
    if isinstance(dom, (AwayFromZero, Lattice)):
        # AwayFromZero: one sign; Lattice: maximum/minimum's operands get
        # disjoint bands (0.1, 0.4) and (0.6, 0.9), ordered by flip
        return (-dom.hi, -dom.lo) if flip else (dom.lo, dom.hi)
    raise TypeError(dom)


def _squash(m, z, lo, hi):
    return lo + (hi - lo) * m.sigmoid(z)


def _mask(shape):
    return (np.arange(int(np.prod(shape))) % 3 != 1).reshape(shape)


def _eval(m, node, xs, base):
    tag = node[0]
    if tag == "input":
        return xs[node[1]]
    if tag == "const":
        return node[1]
    kind, op, flip = node[:3]
    args = [_eval(m, c, xs, base) for c in node[3:]]
    if kind in ("unary", "binary"):
        args = [_squash(m, a, *_bounds(d, flip)) for a, d in zip(args, op.domain)]
        return op.body(m, *args)
    z = args[0]
    shape = np.shape(z)
    if kind == "array2":
        full = np.broadcast_shapes(shape, np.shape(args[1]))
        if op == "where":
            return m.where(_mask(full), z, args[1])
        return m.sum(m.stack([m.broadcast_to(z, full), m.broadcast_to(args[1], full)]),
                     axis=0)
    if op == "broadcast_full":
        return m.broadcast_to(z, np.broadcast_shapes(shape, base))
    if not shape:
        return m.sin(z)
    if op == "sum_keepdims":
        return m.sum(z, axis=-1, keepdims=True)
    if op == "mean_keepdims":
        return m.mean(z, axis=0, keepdims=True)
    if op == "flip":
        return z[::-1]
    if op == "gather":                   # same shape, with repeats
        return z[np.arange(shape[0])[::-1] // 2]
    if op == "reshape_roundtrip":
        return m.reshape(m.reshape(z, (-1,)), shape)
    if op == "transpose_roundtrip":
        return m.transpose(m.transpose(z))
    if op == "matmul_const":
        n = shape[-1]
        return m.matmul(z, np.linspace(-1.0, 1.0, n * n).reshape(n, n) / n)
    if op == "concat_slice":
        return m.concatenate([z, 2.0 * z], axis=-1)[..., shape[-1] // 2:][..., :shape[-1]]
    raise ValueError(op)


def _inputs(shapes, rng):
    return tuple(float(rng.uniform(-2, 2)) if s == () else rng.uniform(-2, 2, s)
                 for s in shapes)


def _like(args, rng):
    return tuple(float(rng.standard_normal()) if np.shape(a) == () else
                 rng.standard_normal(np.shape(a)) for a in args)


def _vdot(a, b):
    return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
                     for x, y in zip(a, b)))


def _close(a, b, rtol, what):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=what)


# ---------------------------------------------------------------------------
# the properties
# ---------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(problems())
def test_modes_agree_on_random_compositions(problem):
    expr, shapes, seed = problem
    base = shapes[0]
    rng = np.random.default_rng(seed)
    xs = _inputs(shapes, rng)
    f = lambda *a: _eval(tnp, expr, a, base)          # noqa: E731
    f_np = lambda *a: _eval(NP, expr, a, base)        # noqa: E731
    nums = tuple(range(len(xs)))

    out = f(*xs)
    _close(out, f_np(*xs), 1e-13, "value vs numpy")

    # forward mode vs central differences
    v = _like(xs, rng)
    h = 1e-6
    plus = f_np(*[x + h * d for x, d in zip(xs, v)])
    minus = f_np(*[x - h * d for x, d in zip(xs, v)])
    fd = (np.asarray(plus) - np.asarray(minus)) / (2 * h)
    _, jv = ta.jvp(f, xs, v)
    _close(jv, fd, 1e-5, "jvp vs central differences")

    # reverse mode vs forward mode: <u, J v> == <J^T u, v>
    out_val, pullback = ta.vjp(f, *xs)
    u = rng.standard_normal(np.shape(out_val))
    u = float(u) if np.shape(out_val) == () else u
    ju = pullback(u)
    lhs, rhs = _vdot([u], [jv]), _vdot(ju, v)
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs)), (lhs, rhs)

    # grad of the weighted sum is the pullback of the weights
    g = ta.grad(lambda *a: tnp.sum(f(*a) * u), argnums=nums)(*xs)
    for gi, ji in zip(g, ju):
        _close(gi, ji, 1e-12, "grad vs vjp")

    # dense Jacobians: forward (batched sweep) == reverse (one sweep a row)
    jf = ta.jacfwd(f, nums)(*xs)
    jr = ta.jacrev(f, nums)(*xs)
    for a, b in zip(jf, jr):
        _close(a, b, 1e-12, "jacfwd vs jacrev")


@settings(max_examples=40, deadline=None)
@given(problems())
def test_second_order_on_random_compositions(problem):
    """hvp (forward over reverse) == jacfwd of grad == differences of grad."""
    expr, shapes, seed = problem
    base = shapes[0]
    rng = np.random.default_rng(seed)
    xs = _inputs(shapes, rng)
    w = rng.standard_normal(base)
    f = lambda *a: tnp.sum(_eval(tnp, expr, a, base) * w)   # noqa: E731
    nums = tuple(range(len(xs)))
    v = _like(xs, rng)
    hv = ta.hvp(f, xs, v)
    hv = hv if len(xs) > 1 else (hv,)
    grad = ta.grad(f, argnums=nums)
    h = 1e-6
    gp = grad(*[x + h * d for x, d in zip(xs, v)])
    gm = grad(*[x - h * d for x, d in zip(xs, v)])
    for k, (a, p, m) in enumerate(zip(hv, gp, gm)):
        fd = (np.asarray(p, np.float64) - np.asarray(m, np.float64)) / (2 * h)
        _close(a, fd, 1e-5, f"hvp vs differences of grad, argument {k}")
