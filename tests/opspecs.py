"""The op-spec table: one row per primitive (STYLE.md guideline 8).

Every gradient test of the primitives is driven by ``SPECS``: the one
parameterised gradient check (``test_primitives.py``), the comparison with
JAX (``test_against_jax.py``) and the random compositions
(``test_properties.py``).  A row says

* ``fn``: the tapead callable (``tnp.sin``, or a lambda over ``tnp``),
* ``np_fn``: the same function on plain numpy (values are compared),
* ``body(m, *args)``: the same function written against a numpy-like
  namespace ``m`` (``ns(np)``, ``ns(jax.numpy)``), for the peer checks,
* ``arity``, ``domain`` (one sampler per argument, chosen so that every
  point is smooth: away from kinks, branch cuts and poles),
* ``kinds``: input kinds, each a name and one shape per argument; the
  shape ``()`` is a Python float (float64: the C scalar fast path) or a
  ``np.float32`` scalar,
* ``orders`` and ``dtypes`` to check, and ``opcode`` (scalar opcode of the
  C kernel, or None for the array primitives).
"""
from __future__ import annotations

import importlib
import pathlib
from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional, Tuple

import numpy as np

import tapead.numpy as tnp
from tapead._core import OPCODES

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------
# domains: how to draw a smooth point for one argument
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """Uniform on (lo, hi)."""
    lo: float
    hi: float

    def sample(self, rng, shape):
        return rng.uniform(self.lo, self.hi, shape)


@dataclass(frozen=True)
class AwayFromZero:
    """|x| uniform on (lo, hi), either sign: keeps off a kink or pole at 0."""
    lo: float
    hi: float

    def sample(self, rng, shape):
        return rng.uniform(self.lo, self.hi, shape) * rng.choice([-1.0, 1.0], shape)


@dataclass(frozen=True)
class Lattice:
    """k + u with k in {-2, ..., 1} and u uniform on (lo, hi).

    Two arguments drawn with disjoint (lo, hi) never tie, even after
    broadcasting: maximum/minimum stay at least 0.2 away from their kink.
    """
    lo: float
    hi: float

    def sample(self, rng, shape):
        return rng.integers(-2, 2, shape) + rng.uniform(self.lo, self.hi, shape)


REAL = Interval(-2.0, 2.0)
POS = Interval(0.1, 3.0)


# ---------------------------------------------------------------------------
# the row type
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class OpSpec:
    name: str
    fn: Callable
    np_fn: Callable
    body: Callable
    arity: int
    domain: Tuple
    kinds: Tuple[Tuple[str, Tuple[tuple, ...]], ...]
    orders: Tuple[int, ...] = (1, 2)
    dtypes: Tuple[np.dtype, ...] = (F64, F32)
    opcode: Optional[int] = None

    def __repr__(self):
        return f"OpSpec({self.name})"

    def sample(self, rng, shapes, dtype=F64):
        """One point: a tuple of arguments of the given shapes and dtype."""
        dtype = np.dtype(dtype)
        out = []
        for dom, shape in zip(self.domain, shapes):
            v = dom.sample(rng, shape)
            if shape == ():
                out.append(float(v) if dtype == F64 else dtype.type(v))
            else:
                out.append(np.asarray(v, dtype=dtype))
        return tuple(out)


class ns:
    """A numpy-like namespace with tapead's extra names (sigmoid, relu)."""

    def __init__(self, module, **extra):
        if module is np and not extra:
            extra = dict(sigmoid=lambda x: 1.0 / (1.0 + np.exp(-x)),
                         relu=lambda x: np.maximum(x, np.zeros((), np.result_type(x))))
        self._module = module
        self.__dict__.update(extra)

    def __getattr__(self, name):
        return getattr(self._module, name)


NP = ns(np)

UNARY_KINDS = (("scalar", ((),)), ("array", ((2, 3),)))
BINARY_KINDS = (("scalar", ((), ())),
                ("array", ((2, 3), (2, 3))),
                ("bcast_row", ((3,), (2, 3))),
                ("bcast_outer", ((2, 1), (1, 3))),
                ("scalar_array", ((), (2, 3))))


# ---------------------------------------------------------------------------
# elementwise: one line per scalar opcode
# ---------------------------------------------------------------------------

def _elementwise(name, fn, np_fn, arity, *domain, ref=None):
    ref = ref or name
    body = (lambda m, *a: getattr(m, ref)(*a)) if isinstance(ref, str) else ref
    return OpSpec(name=name, fn=fn, np_fn=np_fn, body=body, arity=arity,
                  domain=domain or (REAL,) * arity,
                  kinds=UNARY_KINDS if arity == 1 else BINARY_KINDS,
                  opcode=OPCODES[name])


E = _elementwise
ELEMENTWISE = [
    # binary
    E("add", tnp.add, np.add, 2),
    E("sub", tnp.subtract, np.subtract, 2, ref="subtract"),
    E("mul", tnp.multiply, np.multiply, 2, ref="multiply"),
    E("div", tnp.divide, np.divide, 2, REAL, AwayFromZero(0.5, 2.0), ref="divide"),
    E("pow", tnp.power, np.power, 2, Interval(0.5, 2.5), REAL, ref="power"),
    E("maximum", tnp.maximum, np.maximum, 2, Lattice(0.1, 0.4), Lattice(0.6, 0.9)),
    E("minimum", tnp.minimum, np.minimum, 2, Lattice(0.1, 0.4), Lattice(0.6, 0.9)),
    # arctan2(y, x): branch cut on x < 0, y == 0; keep x > 0
    E("arctan2", tnp.arctan2, np.arctan2, 2, REAL, Interval(0.3, 2.0)),
    E("logaddexp", tnp.logaddexp, np.logaddexp, 2),
    E("hypot", tnp.hypot, np.hypot, 2, AwayFromZero(0.3, 2.0), REAL),
    # unary
    E("neg", tnp.negative, np.negative, 1, ref="negative"),
    E("pos", tnp.positive, np.positive, 1, ref="positive"),
    E("abs", tnp.absolute, np.absolute, 1, AwayFromZero(0.2, 2.0), ref="absolute"),
    E("sign", tnp.sign, np.sign, 1, AwayFromZero(0.2, 2.0)),
    E("relu", tnp.relu, NP.relu, 1, AwayFromZero(0.2, 2.0)),
    E("sin", tnp.sin, np.sin, 1),
    E("cos", tnp.cos, np.cos, 1),
    E("tan", tnp.tan, np.tan, 1, Interval(-1.2, 1.2)),
    E("exp", tnp.exp, np.exp, 1),
    E("log", tnp.log, np.log, 1, POS),
    E("log1p", tnp.log1p, np.log1p, 1, Interval(-0.7, 3.0)),
    E("expm1", tnp.expm1, np.expm1, 1),
    E("sqrt", tnp.sqrt, np.sqrt, 1, POS),
    E("tanh", tnp.tanh, np.tanh, 1),
    E("arctan", tnp.arctan, np.arctan, 1),
    E("arcsin", tnp.arcsin, np.arcsin, 1, Interval(-0.9, 0.9)),
    E("arccos", tnp.arccos, np.arccos, 1, Interval(-0.9, 0.9)),
    E("sinh", tnp.sinh, np.sinh, 1),
    E("cosh", tnp.cosh, np.cosh, 1),
    E("sigmoid", tnp.sigmoid, NP.sigmoid, 1, Interval(-3.0, 3.0)),
    E("square", tnp.square, np.square, 1),
    E("reciprocal", tnp.reciprocal, np.reciprocal, 1, AwayFromZero(0.3, 3.0)),
    E("exp2", tnp.exp2, np.exp2, 1),
    E("log2", tnp.log2, np.log2, 1, POS),
    E("log10", tnp.log10, np.log10, 1, POS),
    E("arcsinh", tnp.arcsinh, np.arcsinh, 1),
    E("arccosh", tnp.arccosh, np.arccosh, 1, Interval(1.1, 3.0)),
    E("arctanh", tnp.arctanh, np.arctanh, 1, Interval(-0.9, 0.9)),
    E("cbrt", tnp.cbrt, np.cbrt, 1, AwayFromZero(0.2, 3.0)),
]
del E


# ---------------------------------------------------------------------------
# array primitives: body(m, *args) written once for tnp, numpy and jax.numpy
# ---------------------------------------------------------------------------

MASK = np.array([[True, False, True, True], [False, False, True, False],
                 [True, True, False, True]])
COND = np.array([[True, False, True], [False, False, True]])
ROWS = np.array([0, 2, 0, 0])          # repeats: the VJP must add, not assign
COLS = np.array([3, 1, 3])


def _array_op(name, body, *kinds, domain=None):
    arity = len(kinds[0][1])
    return OpSpec(name=name, fn=partial(body, tnp), np_fn=partial(body, NP), body=body,
                  arity=arity, domain=domain or (REAL,) * arity, kinds=tuple(kinds))


A = _array_op
M23 = (("array", ((2, 3),)),)
M34 = (("array", ((3, 4),)),)
ARRAY_OPS = [
    # reductions
    A("sum", lambda m, x: m.sum(x), *M23),
    A("sum_axis0", lambda m, x: m.sum(x, axis=0), *M23),
    A("sum_axis1", lambda m, x: m.sum(x, axis=1), *M23),
    A("sum_axis0_keepdims", lambda m, x: m.sum(x, axis=0, keepdims=True), *M23),
    A("sum_axis1_keepdims", lambda m, x: m.sum(x, axis=1, keepdims=True), *M23),
    A("sum_keepdims", lambda m, x: m.sum(x, keepdims=True), *M23),
    A("sum_axes02", lambda m, x: m.sum(x, axis=(0, 2)), ("array", ((2, 3, 2),))),
    A("sum_axis_neg1", lambda m, x: m.sum(x, axis=-1), *M23),
    A("mean", lambda m, x: m.mean(x), *M23),
    A("mean_axis0", lambda m, x: m.mean(x, axis=0), *M23),
    A("mean_axis1_keepdims", lambda m, x: m.mean(x, axis=1, keepdims=True), *M23),
    # shape
    A("reshape", lambda m, x: m.reshape(x, (3, 2)), *M23),
    A("reshape_flat", lambda m, x: m.reshape(x, (-1,)), *M23),
    A("reshape_up", lambda m, x: m.reshape(x, (2, 1, 3)), ("array", ((6,),))),
    A("transpose", lambda m, x: m.transpose(x), *M23),
    A("transpose_axes", lambda m, x: m.transpose(x, (1, 2, 0)), ("array", ((2, 3, 2),))),
    A("broadcast_to_row", lambda m, x: m.broadcast_to(x, (2, 3)), ("array", ((3,),))),
    A("broadcast_to_col", lambda m, x: m.broadcast_to(x, (2, 3)), ("array", ((2, 1),))),
    A("broadcast_to_scalar", lambda m, x: m.broadcast_to(x, (2, 3)), ("scalar", ((),))),
    # indexing
    A("getitem_slices", lambda m, x: x[1:, ::2], *M34),
    A("getitem_int", lambda m, x: x[1], *M34),
    A("getitem_int_int", lambda m, x: x[1, 2], *M34),
    A("getitem_neg_step", lambda m, x: x[::-1], ("array", ((5,),))),
    A("getitem_intarray_repeats", lambda m, x: x[ROWS], *M34),
    A("getitem_intarray_cols", lambda m, x: x[:, COLS], *M34),
    A("getitem_mask", lambda m, x: x[MASK], *M34),
    # joining
    A("concatenate_axis0", lambda m, x, y: m.concatenate([x, y], axis=0),
      ("array", ((2, 3), (1, 3)))),
    A("concatenate_axis1", lambda m, x, y: m.concatenate([x, y], axis=1),
      ("array", ((2, 3), (2, 2)))),
    A("concatenate_three", lambda m, x, y, z: m.concatenate([x, y, z]),
      ("array", ((2,), (3,), (1,)))),
    A("stack", lambda m, x, y: m.stack([x, y]), ("array", ((3,), (3,)))),
    A("stack_axis1", lambda m, x, y: m.stack([x, y], axis=1), ("array", ((2, 3), (2, 3)))),
    # scalars stacked (a loop's per-step outputs), one piece used twice
    A("stack_scalars", lambda m, x, y, z: m.stack([x, y * x, z, x]),
      ("scalar", ((), (), ()))),
    A("stack_axis_last", lambda m, x, y: m.stack([x, y, x], axis=-1),
      ("array", ((2, 3), (2, 3)))),
    # contractions
    A("matmul", lambda m, a, b: m.matmul(a, b),
      ("vv", ((3,), (3,))), ("mv", ((2, 3), (3,))), ("vm", ((3,), (3, 2))),
      ("mm", ((2, 3), (3, 4))), ("batched", ((2, 2, 3), (2, 3, 2))),
      ("bcast_batch", ((2, 2, 3), (3, 2)))),
    A("dot", lambda m, a, b: m.dot(a, b),
      ("vv", ((3,), (3,))), ("mv", ((2, 3), (3,))), ("vm", ((3,), (3, 2))),
      ("mm", ((2, 3), (3, 4)))),
    A("outer", lambda m, a, b: m.outer(a, b), ("array", ((3,), (2,)))),
    A("where", lambda m, x, y: m.where(COND, x, y),
      ("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))),
      ("scalar_array", ((), (2, 3)))),
]
del A

# each family of the numpy-coverage work keeps its rows in tests/opspecs_<family>.py
# (a list ARRAY_OPS built with _array_op, and optionally NO_JAX: the names of
# rows JAX has no counterpart for)
EXTRA_OPS = []
NO_JAX: set = set()
for _path in sorted(pathlib.Path(__file__).parent.glob("opspecs_*.py")):
    _mod = importlib.import_module(_path.stem)
    EXTRA_OPS += _mod.ARRAY_OPS
    NO_JAX |= set(getattr(_mod, "NO_JAX", ()))

SPECS = ELEMENTWISE + ARRAY_OPS + EXTRA_OPS
BY_NAME = {s.name: s for s in SPECS}
assert len(BY_NAME) == len(SPECS), "duplicate spec names"


def cases(specs=SPECS, dtypes=None):
    """(spec, kind name, shapes, dtype) for every row, kind and dtype."""
    out = []
    for s in specs:
        for kind, shapes in s.kinds:
            for dt in (dtypes or s.dtypes):
                out.append((s, kind, shapes, np.dtype(dt)))
    return out


def case_id(case):
    s, kind, _, dt = case
    return f"{s.name}-{kind}-{dt.name}"
