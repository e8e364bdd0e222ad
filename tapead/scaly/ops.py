"""The op table: every Scaly op with its type rule, evaluation and derivatives.

One entry per op, grouped by family.  Each op names the ``Primitive`` its
``fn`` records on a tape (``OpRule.prim``).  ``fn`` is written with
``tapead.numpy`` operations, so the same function folds constants (plain
numpy values) and lowers a graph onto a tapead tape (tracers).  Derivative
rules build new interned expressions:

* ``vjp(g, node)`` returns one contribution per operand, ``g`` times the
  local partial (``None`` = a known zero).  The reverse sweep reduces
  contributions that were broadcast back to the operand's shape.
* ``jvp(tangents, node)`` returns the output tangent (``None`` = zero);
  tangents of operands are ``None`` when zero.

Elementwise ops whose primitive states its local partials (``prim.partial``,
``prim.partials``: arithmetic and numpy ufuncs of the operands and the
result, which build Scaly ops on expressions, ``Expr.__array_ufunc__``) take
their rules from them (:func:`from_primitive`): the VJP is ``g`` times the
partial, the JVP the sum of tangents times partials, the batched JVP follows
the primitive's ``BROADCAST`` batching and the ``diff`` flag its sparsity (no
dependence: no derivative).  The sparsity of every op is the primitive's own
rule, since patterns are found on the lowered tape.  The other ops keep rules
of their own, each with the reason (``OpRule.own``, :func:`own_rules`: the
primitive's rule reads values at a point, or the scaly op has its own
parameterisation);
``tests/test_scaly_registry.py`` checks the table and compares every op with
its primitive, value and first and second derivatives.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import tapead.numpy as tnp
from tapead import _core, patterns
from tapead._prims import elementwise as _ew, indexing as _ix, linalg as _la
from tapead._prims import structural as _st
from tapead._prims.base import BROADCAST, Primitive, defzero
from tapead.errors import ScalyShapeError
from tapead.scaly.expr import (OPS, OpRule, apply, const, gather, ones, reshape, scatter)
from tapead.scaly.types import TensorType, dtypes


def register(name, infer, fn, vjp=None, jvp=None, diff=True, jvp_many=None,
             prim=None, own=None) -> OpRule:
    """Enter an op in the table; ``prim`` is the primitive ``fn`` records and
    ``own`` says why the derivative rules given are the op's own."""
    rule = OpRule(name, infer, fn, vjp, jvp, diff, jvp_many, prim, own)
    OPS[name] = rule
    return rule


# ---------------------------------------------------------------------------
# batched forward rules: tangents carry k directions on a leading axis
# ---------------------------------------------------------------------------

def lift(t, operand, node, k: int):
    """A batched tangent ``(k,) + operand.shape`` reshaped to broadcast
    against ``node.shape``: ``(k, 1, ..., 1) + operand.shape``."""
    if t is None:
        return None
    pad = node.ndim - operand.ndim
    shape = (k,) + (1,) * pad + operand.shape
    return t if t.shape == shape else reshape(t, shape)


def elementwise_many(jvp):
    """The batched rule of an elementwise op: its ``jvp`` on lifted tangents.

    The local partials (``cos(x)`` for ``sin``) have the node's shape and are
    built once; they broadcast over the leading direction axis.
    """
    def jvp_many(ts, n, k):
        return jvp([lift(t, o, n, k) for t, o in zip(ts, n.operands)], n)
    return jvp_many


def _shift(axes):
    return tuple(a + 1 for a in axes)


def total(terms) -> Optional[object]:
    """The sum of the non-None terms, left to right (None if all are None)."""
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


# ---------------------------------------------------------------------------
# type rules
# ---------------------------------------------------------------------------

def _broadcast(operands, op):
    first = operands[0].shape
    if all(o.shape == first for o in operands):
        return first
    try:
        return np.broadcast_shapes(*(o.shape for o in operands))
    except ValueError:
        shapes = " and ".join(str(o.shape) for o in operands)
        raise ScalyShapeError(f"expr.{op}: shapes {shapes} do not broadcast together; "
                              "index or reshape the operands to matching shapes") from None


def _arith(op, floating=False):
    def infer(operands, attrs):
        dt = operands[0].dtype
        if any(o.dtype != dt for o in operands):
            dt = np.result_type(*(o.dtype for o in operands))
        if floating or dt == np.bool_:
            dt = dtypes.float64
        return TensorType(_broadcast(operands, op), dt)
    return infer


def _compare(op):
    return lambda operands, attrs: TensorType(_broadcast(operands, op), dtypes.bool_)


def _same_float(operands, attrs):
    return TensorType(operands[0].shape, dtypes.float64)


# ---------------------------------------------------------------------------
# leaves
# ---------------------------------------------------------------------------

register("const", lambda ops, a: TensorType(a["value"].shape, a["value"].dtype),
         lambda value: value)
register("input", lambda ops, a: TensorType(a["shape"], {"float64": dtypes.float64,
                                                         "int64": dtypes.int64,
                                                         "bool": dtypes.bool_}[a["dtype"]]),
         None)


# ---------------------------------------------------------------------------
# rules from the primitive: the elementwise family's local partials
# ---------------------------------------------------------------------------

def _partials(prim: Primitive):
    """The primitive's local partials as functions of a node: ``d(x, ans)`` of a
    unary primitive (``prim.partial``), ``dx, dy(x, y, ans)`` of a binary one
    (``prim.partials``), applied to the node's operands and the node itself."""
    if getattr(prim, "partials", None) is not None:
        return [lambda n, d=d: d(*n.operands, n) for d in prim.partials]
    if getattr(prim, "partial", None) is not None:
        return [lambda n: prim.partial(n.operands[0], n)]
    raise TypeError(f"primitive {prim.name!r} states no local partial (prim.partial or "
                    "prim.partials): give the scaly op rules of its own, with own=reason")


def _scaled(t, d):
    """``t`` times a local partial; the numbers 1 and -1 (linear rules) give ``t``
    and ``-t`` without a product."""
    if isinstance(d, (int, float)) and d in (1.0, -1.0):
        return t if d == 1.0 else -t
    return t * d


def _tangent_total(ts, ds):
    """The sum of ``t_k d_k`` over the non-zero tangents; a partial of -1
    subtracts its tangent (``ta - tb``, as subtraction's JVP)."""
    out = None
    for t, d in zip(ts, ds):
        if t is None:
            continue
        d = d()
        if out is not None and isinstance(d, (int, float)) and d == -1.0:
            out = out - t
        else:
            term = _scaled(t, d)
            out = term if out is None else out + term
    return out


def from_primitive(name: str, infer, fn, prim: Primitive) -> OpRule:
    """An elementwise op whose rules are its primitive's: VJP ``g * d_k``, JVP
    ``sum_k t_k d_k`` from the primitive's local partials, the batched JVP by
    broadcasting (the primitive's ``BROADCAST`` batching), and no derivative
    when the primitive's sparsity is ``patterns.ZERO`` (no dependence)."""
    if prim.batching is not BROADCAST and prim.sparsity is not patterns.ZERO:
        raise TypeError(f"primitive {prim.name!r} does not batch by broadcasting: its "
                        "scaly op needs rules of its own")
    if prim.sparsity is patterns.ZERO:
        return register(name, infer, fn, diff=False, prim=prim)
    _partials(prim)                          # refuse a primitive without partials now

    def vjp(g, n):                           # the primitive's partials, read when used
        return [_scaled(g, d(n)) for d in _partials(prim)]

    def jvp(ts, n):
        return _tangent_total(ts, [lambda d=d: d(n) for d in _partials(prim)])
    return register(name, infer, fn, vjp=vjp, jvp=jvp, jvp_many=elementwise_many(jvp),
                    prim=prim)


# ---------------------------------------------------------------------------
# elementwise arithmetic
# ---------------------------------------------------------------------------

from_primitive("add", _arith("add"), tnp.add, _ew.add.prim)
from_primitive("sub", _arith("sub"), tnp.subtract, _ew.subtract.prim)
from_primitive("mul", _arith("mul"), tnp.multiply, _ew.multiply.prim)
from_primitive("neg", lambda ops, a: ops[0].type, tnp.negative, _ew.negative.prim)


def _div_jvp(ts, n):
    return total([None if ts[0] is None else ts[0] / n.operands[1],
                  None if ts[1] is None else -(ts[1] * (n / n.operands[1]))])


register("div", _arith("div", floating=True), tnp.divide,
         vjp=lambda g, n: [g / n.operands[1], -(g * (n / n.operands[1]))],
         jvp=_div_jvp, jvp_many=elementwise_many(_div_jvp), prim=_ew.divide.prim,
         own="one division g / y; the primitive's partial 1 / y times g is another "
             "expression, printed and rounded differently")


def _pow_fn(a, b):
    if isinstance(a, _core.Box) or isinstance(b, _core.Box):
        return a ** b
    return np.power(np.asarray(a, dtype=np.result_type(a, b, np.float64)), b)


def _nonzero_const(e) -> bool:
    return e.op == "const" and bool(np.all(np.asarray(e.attrs["value"]) != 0))


def _pow_partials(n):
    """The tape's convention (``_pow_dx``/``_pow_dy`` in tapead/_prims/elementwise.py,
    docs/nonsmooth.md): d/dx x**y = 0 where y == 0 (x**0 has no slope, even at
    x = 0); d/dy x**y = 0 where x**y == 0.  Constant exponents and bases
    without zeros keep the plain formulas."""
    a, b = n.operands
    da = b * a ** (b - 1.0)
    if not _nonzero_const(b):
        da = where(b == 0.0, 0.0, da)
    db = None
    if b.diff:
        if _nonzero_const(a):
            db = a.log() * n
        else:
            zero = n == 0.0
            db = where(zero, 0.0, where(zero, 1.0, a).log() * n)
    return da, db


def _pow_jvp(ts, n):
    return total([None if t is None or p is None else t * p
                  for t, p in zip(ts, _pow_partials(n))])


register("pow", _arith("pow", floating=True), _pow_fn,
         vjp=lambda g, n: [g * p if p is not None else None for p in _pow_partials(n)],
         jvp=_pow_jvp, jvp_many=elementwise_many(_pow_jvp), prim=_ew.power.prim,
         own="the primitive's partials choose a formula from the values (zeros of "
             "x**y, y == 0); a graph has no values, so the choice is a where()")


# ---------------------------------------------------------------------------
# unary elementwise functions
# ---------------------------------------------------------------------------

# sin's and cos's partials are cos and -sin given the partner (the tape may hold
# it); abs's is the sign of x (sign(0) = 0): on expressions, numpy's ufuncs build
# those ops (Expr.__array_ufunc__), so the partials give the same expressions
for _name, _fn, _ewf in (("sin", tnp.sin, _ew.sin), ("cos", tnp.cos, _ew.cos),
                         ("tan", tnp.tan, _ew.tan), ("exp", tnp.exp, _ew.exp),
                         ("log", tnp.log, _ew.log), ("sqrt", tnp.sqrt, _ew.sqrt),
                         ("tanh", tnp.tanh, _ew.tanh), ("abs", tnp.abs, _ew.absolute),
                         ("sign", tnp.sign, _ew.sign)):
    from_primitive(_name, _same_float, _fn, _ewf.prim)


# ---------------------------------------------------------------------------
# where(c, x, y): c a bool expression (no derivative), x and y differentiable
# ---------------------------------------------------------------------------

def _where_infer(operands, attrs):
    c, x, y = operands
    dt = np.result_type(x.dtype, y.dtype)
    if dt == np.bool_ or not np.issubdtype(dt, np.floating):
        dt = dtypes.float64
    return TensorType(_broadcast(operands, "where"), dt)


def _where_fn(c, x, y):
    if any(isinstance(v, _core.Box) for v in (c, x, y)):
        # the condition stays an operand, so a replayed tape recomputes it
        return _core.bind(_ew.where_p, c, x, y)
    return np.where(c, x, y)


def where(c, x, y):
    """``where(c, x, y)`` as an expression (numbers become constants)."""
    return apply("where", c, x, y)


def _where_jvp(ts, n):
    c = n.operands[0]
    tx, ty = ts[1], ts[2]
    if tx is None and ty is None:
        return None
    return where(c, 0.0 if tx is None else tx, 0.0 if ty is None else ty)


register("where", _where_infer, _where_fn,
         vjp=lambda g, n: [None, where(n.operands[0], g, 0.0), where(n.operands[0], 0.0, g)],
         jvp=_where_jvp, jvp_many=elementwise_many(_where_jvp), prim=_ew.where_p,
         own="the primitive's rules call tapead's where, which reads the condition's "
             "value; here the condition stays an expression")


# ---------------------------------------------------------------------------
# comparisons: bool results, no derivative, no tape guards
# ---------------------------------------------------------------------------

def _comparison(name: str, ufunc):
    prim = Primitive(f"scaly_{name}", ufunc, saves=())
    defzero(prim)                             # a bool: no derivative, no dependence

    def fn(a, b):
        if isinstance(a, _core.Box) or isinstance(b, _core.Box):
            return _core.bind(prim, a, b)
        return ufunc(a, b)
    from_primitive(name, _compare(name), fn, prim)


for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
    _comparison(_name, _ufunc)


# ---------------------------------------------------------------------------
# reductions and shape ops
# ---------------------------------------------------------------------------

def _sum_infer(ops, a):
    x = ops[0]
    shape = tuple(d for i, d in enumerate(x.shape) if i not in a["axes"])
    dt = dtypes.int64 if x.dtype == dtypes.bool_ else x.dtype
    return TensorType(shape, dt)


def _sum_fn(x, axes):
    return tnp.sum(x, axis=axes) if axes else x


def _sum_vjp(g, n):
    x = n.operands[0]
    if g.ndim:
        g = reshape(g, tuple(1 if i in n.attrs["axes"] else d for i, d in enumerate(x.shape)))
    return [g * ones(x.shape)]


#: why the structural ops keep rules of their own
_STRUCTURAL = ("a structural op: the primitive's rules build tapead arrays from the "
               "tape's parameters; scaly's op has its own attributes (flat indices, "
               "axes) and its rules are the same moves on expressions")

register("sum", _sum_infer, _sum_fn, vjp=_sum_vjp,
         jvp=lambda ts, n: apply("sum", ts[0], axes=n.attrs["axes"]),
         jvp_many=lambda ts, n, k: apply("sum", ts[0], axes=_shift(n.attrs["axes"])),
         prim=_st.sum_p, own=_STRUCTURAL)


def _reshape_infer(ops, a):
    if int(np.prod(a["shape"], dtype=np.int64)) != ops[0].size:
        raise ScalyShapeError(f"cannot reshape an expression of shape {ops[0].shape} "
                              f"to {a['shape']}: the sizes differ")
    return TensorType(a["shape"], ops[0].dtype)


register("reshape", _reshape_infer, lambda x, shape: tnp.reshape(x, shape),
         vjp=lambda g, n: [reshape(g, n.operands[0].shape)],
         jvp=lambda ts, n: reshape(ts[0], n.attrs["shape"]),
         jvp_many=lambda ts, n, k: reshape(ts[0], (k,) + n.attrs["shape"]),
         prim=_st.reshape_p, own=_STRUCTURAL)


def _gather_infer(ops, a):
    idx, size = a["indices"], ops[0].size
    if len(idx) != int(np.prod(a["shape"], dtype=np.int64)):
        raise ScalyShapeError(f"gather: {len(idx)} indices for shape {a['shape']}")
    if idx and (min(idx) < 0 or max(idx) >= size):
        raise IndexError(f"gather: index out of range for an expression of {size} elements")
    return TensorType(a["shape"], ops[0].dtype)


def _flat_take(x, idx):
    flat = tnp.reshape(x, (-1,))
    n = len(idx)
    if n and idx == tuple(range(idx[0], idx[0] + n)):
        return flat[idx[0]:idx[0] + n]
    return flat[np.asarray(idx, dtype=np.int64)]


def _gather_fn(x, indices, shape):
    if shape == ():
        if np.ndim(x) == 0:
            return x
        return tnp.reshape(x, (-1,))[indices[0]]
    return tnp.reshape(_flat_take(x, indices), shape)


def _scatter_fn(g, indices, shape):
    size = int(np.prod(shape, dtype=np.int64))
    out = tnp.at(np.zeros(size))[np.asarray(indices, dtype=np.int64)].add(
        tnp.reshape(g, (-1,)))
    return tnp.reshape(out, shape)


def _batched_indices(indices, size: int, k: int) -> np.ndarray:
    """Flat indices of every direction: direction ``j`` is offset by ``j * size``."""
    idx = np.asarray(indices, dtype=np.int64)
    return (np.arange(k, dtype=np.int64)[:, None] * size + idx[None, :]).reshape(-1)


register("gather", _gather_infer, _gather_fn,
         vjp=lambda g, n: [scatter(g, n.attrs["indices"], n.operands[0].shape)],
         jvp=lambda ts, n: gather(ts[0], n.attrs["indices"], n.attrs["shape"]),
         jvp_many=lambda ts, n, k: gather(
             ts[0], _batched_indices(n.attrs["indices"], n.operands[0].size, k),
             (k,) + n.attrs["shape"]), prim=_ix.getitem_p, own=_STRUCTURAL)
register("scatter", lambda ops, a: TensorType(a["shape"], ops[0].dtype), _scatter_fn,
         vjp=lambda g, n: [gather(g, n.attrs["indices"], n.operands[0].shape)],
         jvp=lambda ts, n: scatter(ts[0], n.attrs["indices"], n.attrs["shape"]),
         jvp_many=lambda ts, n, k: scatter(
             ts[0], _batched_indices(n.attrs["indices"], n.size, k), (k,) + n.attrs["shape"]),
         prim=_ix.index_update_p, own=_STRUCTURAL)


def _stack_infer(ops, a):
    shapes = {o.shape for o in ops}
    if len(shapes) != 1:
        raise ScalyShapeError(f"sc.stack: every expression must have the same shape, got "
                              f"{[o.shape for o in ops]}")
    shape = list(ops[0].shape)
    shape.insert(a["axis"], len(ops))
    return TensorType(tuple(shape), np.result_type(*(o.dtype for o in ops)))


def _stack_positions(n):
    """Flat output positions of each stacked operand."""
    positions = np.arange(n.size, dtype=np.int64).reshape(n.shape)
    return [np.take(positions, k, axis=n.attrs["axis"]) for k in range(len(n.operands))]


def _stack_jvp(ts, n):
    if all(t is None for t in ts):
        return None
    parts = [const(np.zeros(o.shape)) if t is None else t for t, o in zip(ts, n.operands)]
    return apply("stack", *parts, axis=n.attrs["axis"])


def _stack_jvp_many(ts, n, k):
    parts = [const(np.zeros((k,) + o.shape)) if t is None else t
             for t, o in zip(ts, n.operands)]
    return apply("stack", *parts, axis=n.attrs["axis"] + 1)


register("stack", _stack_infer, lambda *xs, axis: tnp.stack(list(xs), axis=axis),
         vjp=lambda g, n: [gather(g, p, o.shape)
                           for p, o in zip(_stack_positions(n), n.operands)],
         jvp=_stack_jvp, jvp_many=_stack_jvp_many, prim=_st.stack_p, own=_STRUCTURAL)


# ---------------------------------------------------------------------------
# linear algebra: transpose and matmul (1-d and 2-d operands)
# ---------------------------------------------------------------------------

def _transpose_infer(ops, a):
    axes = a["axes"]
    if sorted(axes) != list(range(ops[0].ndim)):
        raise ScalyShapeError(f"transpose: axes {axes} are not a permutation of the "
                              f"{ops[0].ndim} axes of an expression of shape {ops[0].shape}")
    return TensorType(tuple(ops[0].shape[i] for i in axes), ops[0].dtype)


def transpose(x, axes) -> object:
    axes = tuple(int(i) for i in axes)
    if axes == tuple(range(len(axes))):
        return x
    return apply("transpose", x, axes=axes)


def _inverse(axes):
    return tuple(int(i) for i in np.argsort(axes))


register("transpose", _transpose_infer, lambda x, axes: tnp.transpose(x, axes),
         vjp=lambda g, n: [transpose(g, _inverse(n.attrs["axes"]))],
         jvp=lambda ts, n: transpose(ts[0], n.attrs["axes"]),
         jvp_many=lambda ts, n, k: transpose(ts[0], (0,) + _shift(n.attrs["axes"])),
         prim=_st.transpose_p, own=_STRUCTURAL)


def _matmul_infer(ops, a):
    x, y = ops
    if x.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise ScalyShapeError(f"expr.matmul: operands of shapes {x.shape} and {y.shape}; "
                              "@ takes 1-d and 2-d expressions (reshape or index others)")
    if x.shape[-1] != y.shape[0]:
        raise ScalyShapeError(f"expr.matmul: shapes {x.shape} and {y.shape} do not match "
                              f"({x.shape[-1]} != {y.shape[0]}): the last axis of the left "
                              "operand must equal the first axis of the right one")
    dt = np.result_type(x.dtype, y.dtype)
    if dt == np.bool_:
        dt = dtypes.float64
    return TensorType(x.shape[:-1] + y.shape[1:], dt)


def _T(x):
    return transpose(x, (1, 0)) if x.ndim == 2 else x


def _outer(u, v):
    return reshape(u, (u.size, 1)) * reshape(v, (1, v.size))


def _matmul_vjp(g, n):
    a, b = n.operands
    da = db = None
    if a.diff:
        if b.ndim == 1:
            da = g * b if a.ndim == 1 else _outer(g, b)
        else:
            da = apply("matmul", b, g) if a.ndim == 1 else apply("matmul", g, _T(b))
    if b.diff:
        if a.ndim == 1:
            db = g * a if b.ndim == 1 else _outer(a, g)
        else:
            db = apply("matmul", _T(a), g)
    return [da, db]


def _matmul_jvp(ts, n):
    a, b = n.operands
    return total([None if ts[0] is None else apply("matmul", ts[0], b),
                  None if ts[1] is None else apply("matmul", a, ts[1])])


def _matmul_left_many(ta, b, n, k):
    """``k`` tangents of the left operand times a fixed ``b``: one matrix product
    ``(k*m, n) @ b``."""
    a = n.operands[0]
    rows = k * (a.shape[0] if a.ndim == 2 else 1)
    return reshape(apply("matmul", reshape(ta, (rows, a.shape[-1])), b), (k,) + n.shape)


def _matmul_right_many(a, tb, n, k):
    """A fixed ``a`` times ``k`` tangents of the right operand, as one product."""
    b = n.operands[1]
    if b.ndim == 1:                              # (k, n) @ a.T -> (k,) + n.shape
        return apply("matmul", tb, _T(a))
    m, p = b.shape
    wide = reshape(transpose(tb, (1, 0, 2)), (m, k * p))
    prod = apply("matmul", a, wide)
    if a.ndim == 1:
        return reshape(prod, (k, p))
    return transpose(reshape(prod, (a.shape[0], k, p)), (1, 0, 2))


def _matmul_jvp_many(ts, n, k):
    a, b = n.operands
    return total([None if ts[0] is None else _matmul_left_many(ts[0], b, n, k),
                  None if ts[1] is None else _matmul_right_many(a, ts[1], n, k)])


register("matmul", _matmul_infer, tnp.matmul, vjp=_matmul_vjp, jvp=_matmul_jvp,
         jvp_many=_matmul_jvp_many, prim=_la.matmul_p,
         own="1-d and 2-d operands only, with transposes and outer products as "
             "expressions; the primitive's rules handle any rank with tapead arrays")


# ---------------------------------------------------------------------------
# which ops keep rules of their own
# ---------------------------------------------------------------------------

def own_rules() -> dict:
    """Op name -> why its derivative rules are scaly's own and not its
    primitive's (the ops built by :func:`from_primitive` take them from it)."""
    return {name: rule.own for name, rule in OPS.items() if rule.own is not None}
