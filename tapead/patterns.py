"""Sparsity patterns read off a recorded tape, without numbers.

A node's *pattern* says which input elements each of its elements depends
on: a ``scipy.sparse.csr_array`` of shape (node size, total input size), or
for a scalar node (and a one-element object node) a sorted int32 array of
input indices.  Scalar nodes are handled by the C loop of
:mod:`tapead._patterns`; object nodes by the sparsity rule each primitive
declares right under its definition (``prim.defsparsity(rule)``, read here
as ``prim.sparsity``).  This module holds the rule *functions*, one per
family: ``ZERO``, ``ELEMENTWISE``, ``MOVE``, ``REDUCTION``, ``ALONG_AXIS``,
``CONTRACTION``, ``MATMUL``... and ``DENSE`` (every output element depends
on every input element any parent depends on: a superset, never a miss),
which a primitive declares with the reason its pattern is dense.  A rule
must hold at every point, since a pattern is reused across points.
:mod:`tapead.sparse` builds the sparse derivatives on these patterns.
"""
from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np
import scipy.sparse as sp

from tapead import _core, _patterns
from tapead._core import Tracer

_OP_ELEM = _core.STRUCTURAL_OPCODES["elem"]

__all__ = ["tape_sparsity", "recording_key", "DENSE", "ZERO", "ELEMENTWISE", "PRODUCT", "WHERE",
           "MOVE", "INDEX_UPDATE", "INDEX_ADD_ZEROS", "REDUCTION", "CUMULATIVE", "ALONG_AXIS",
           "MATMUL", "CONTRACTION", "MATRIX_FUNCTION", "elementwise_in", "astype_rule"]

_EMPTY = np.empty(0, dtype=np.int32)
#: a matmul whose pairs (output element, contracted element) exceed this
#: falls back to the dense rule
_MATMUL_PAIRS_LIMIT = 20_000_000


# ---------------------------------------------------------------------------
# patterns as sparse matrices
# ---------------------------------------------------------------------------

def _shape(v) -> tuple:
    return np.shape(_core.concrete(v))


def _as_csr(p, N: int) -> sp.csr_array:
    """A node's pattern as a CSR matrix (a scalar node's index set -> one row)."""
    if type(p) is np.ndarray:
        return sp.csr_array((np.ones(len(p)), p, np.array([0, len(p)], np.int32)),
                            shape=(1, N))
    return p


def _row_set(p) -> np.ndarray:
    """The union of a pattern's rows as a sorted int32 array."""
    if type(p) is np.ndarray:
        return p
    return np.unique(p.indices).astype(np.int32)


def _select(out_size: int, rows, cols, P: sp.csr_array) -> sp.csr_array:
    """Row ``rows[t]`` of the result unions row ``cols[t]`` of ``P``."""
    rows = np.asarray(rows, dtype=np.intp).ravel()
    cols = np.asarray(cols, dtype=np.intp).ravel()
    G = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(out_size, P.shape[0]))
    return G @ P


def _clean(P: sp.csr_array) -> sp.csr_array:
    """Canonical form with all stored values 1 (a pattern, not numbers)."""
    P = sp.csr_array(P)
    P.sum_duplicates()
    P.data[:] = 1.0
    return P


def _empty(size: int, N: int) -> sp.csr_array:
    return sp.csr_array((size, N))


def _index_array(shape, offset=0):
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.intp).reshape(shape) \
        + offset


# ---------------------------------------------------------------------------
# rules: (rec, pats, shapes, out_shape, N) -> pattern
#   pats[k]   CSR pattern of positional argument k, None for a constant
#   shapes[k] its shape; rec.consts[k] its value when constant
# ---------------------------------------------------------------------------

def _dense_rule(rec, pats, shapes, out_shape, N):
    """Fallback: every output element depends on everything any parent does."""
    size = int(np.prod(out_shape, dtype=np.int64))
    cols = np.unique(np.concatenate([p.indices for p in pats if p is not None]
                                    + [_EMPTY]))
    if size == 0 or len(cols) == 0:
        return _empty(size, N)
    indptr = np.arange(size + 1, dtype=np.int64) * len(cols)
    return sp.csr_array((np.ones(size * len(cols)), np.tile(cols, size), indptr),
                        shape=(size, N))


def _zero_rule(rec, pats, shapes, out_shape, N):
    """Derivative identically zero (sign, stop_gradient...)."""
    return _empty(int(np.prod(out_shape, dtype=np.int64)), N)


def _elementwise_rule(rec, pats, shapes, out_shape, N):
    """Output element e unions element e of every operand, with broadcasting."""
    size = int(np.prod(out_shape, dtype=np.int64))
    out = _empty(size, N)
    rows = np.arange(size)
    for p, shape in zip(pats, shapes):
        if p is not None:
            if tuple(shape) == tuple(out_shape):        # row e is row e: no selection
                out = out + p
                continue
            src = np.broadcast_to(_index_array(shape), out_shape)
            out = out + _select(size, rows, src, p)
    return out


def _product_rule(rec, pats, shapes, out_shape, N):
    """``x * c`` with a constant ``c``: elementwise, except where ``c`` is 0
    (``0 * x`` has no dependence on ``x``)."""
    if all(p is not None for p in pats):
        return _elementwise_rule(rec, pats, shapes, out_shape, N)
    k = 0 if pats[0] is not None else 1
    c = rec.consts[1 - k]
    if pats[k] is None or isinstance(c, _core.Box):
        return _elementwise_rule(rec, pats, shapes, out_shape, N)
    keep = np.broadcast_to(np.asarray(c) != 0, out_shape).ravel()
    size = keep.size
    rows = np.flatnonzero(keep)
    src = np.broadcast_to(_index_array(shapes[k]), out_shape).ravel()
    return _select(size, rows, src[rows], pats[k])


def _where_rule(rec, pats, shapes, out_shape, N):
    """``where(c, x, y)``: x's element where c holds, y's elsewhere."""
    cond = rec.consts[0] if pats[0] is None else None
    if cond is None or isinstance(cond, _core.Box):
        return _elementwise_rule(rec, [None] + list(pats[1:]), shapes, out_shape, N)
    c = np.broadcast_to(np.asarray(cond, dtype=bool), out_shape).ravel()
    size = c.size
    out = _empty(size, N)
    for p, shape, take in ((pats[1], shapes[1], c), (pats[2], shapes[2], ~c)):
        if p is not None:
            src = np.broadcast_to(_index_array(shape), out_shape).ravel()
            rows = np.flatnonzero(take)
            out = out + _select(size, rows, src[rows], p)
    return out


def _stacked(pats, N):
    parts = [p for p in pats if p is not None]
    return sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]


def _move_rule(rec, pats, shapes, out_shape, N):
    """Pure data movement (reshape, transpose, getitem, concatenate, set...):
    apply the primitive to arrays of row indices to learn which parent row
    feeds each output element (-1: a constant)."""
    size = int(np.prod(out_shape, dtype=np.int64))
    if all(p is None for p in pats):
        return _empty(size, N)
    args, off = [], 0
    for p, shape in zip(pats, shapes):
        if p is None:
            args.append(np.full(shape, -1, dtype=np.intp))
        else:
            args.append(_index_array(shape, off))
            off += p.shape[0]
    src = np.asarray(rec.prim.impl(*args, **rec.params)).ravel()
    rows = np.flatnonzero(src >= 0)
    return _select(size, rows, src[rows], _stacked(pats, N))


def _index_update_rule(rec, pats, shapes, out_shape, N):
    """``x`` with ``v`` written at ``idx``: "set" moves rows, "add" unions."""
    if rec.params.get("mode", "set") == "set":
        return _move_rule(rec, pats, shapes, out_shape, N)
    px, pv = pats[0], pats[1]
    size = int(np.prod(out_shape, dtype=np.int64))
    out = px if px is not None else _empty(size, N)
    if pv is not None:
        target = _index_array(shapes[0])[rec.params["idx"]]
        src = np.empty(target.shape, dtype=np.intp)
        src[...] = _index_array(shapes[1])
        out = out + _select(size, target, src, pv)
    return out


def _index_add_zeros_rule(rec, pats, shapes, out_shape, N):
    """``zeros(shape)`` with ``g`` added at ``idx`` (the transpose of getitem)."""
    size = int(np.prod(out_shape, dtype=np.int64))
    if pats[0] is None:
        return _empty(size, N)
    target = _index_array(out_shape)[rec.params["idx"]]
    src = np.empty(target.shape, dtype=np.intp)
    src[...] = _index_array(shapes[0])
    return _select(size, target, src, pats[0])


def _reduction_rule(rec, pats, shapes, out_shape, N):
    """``sum``/``prod`` over ``axis``: an output element unions its group."""
    shape = shapes[0]
    axis = rec.params.get("axis")
    kd_shape = np.sum(np.zeros(shape, dtype=np.int8), axis=axis, keepdims=True).shape
    size = int(np.prod(out_shape, dtype=np.int64))
    rows = np.broadcast_to(_index_array(kd_shape), shape)
    return _select(size, rows, _index_array(shape), pats[0])


def _cumulative_rule(rec, pats, shapes, out_shape, N):
    """``cumsum``/``cumprod``: element i along the axis unions elements 0..i."""
    axis = rec.params.get("axis")
    src, dst = _index_array(shapes[0]), _index_array(out_shape)
    if axis is None:
        src, dst, axis = src.ravel(), dst.ravel(), 0
    src, dst = np.moveaxis(src, axis, -1), np.moveaxis(dst, axis, -1)
    ii, jj = np.tril_indices(src.shape[-1])
    size = int(np.prod(out_shape, dtype=np.int64))
    return _select(size, dst[..., ii], src[..., jj], pats[0])


def _matmul_rule(rec, pats, shapes, out_shape, N):
    """``a @ b``: element (i, j) unions row i of a and column j of b; with a
    constant operand only its nonzero entries connect."""
    (pa, pb), (sa, sb) = pats, shapes
    A, B = _index_array(sa), _index_array(sb)
    a2 = A[None, :] if A.ndim == 1 else A
    b2 = B[:, None] if B.ndim == 1 else B
    n, k = a2.shape[-2:]
    m = b2.shape[-1]
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    size = int(np.prod(out_shape, dtype=np.int64))
    full = batch + (n, m, k)
    if int(np.prod(full, dtype=np.int64)) > _MATMUL_PAIRS_LIMIT:
        return _dense_rule(rec, pats, shapes, out_shape, N)
    ia = np.broadcast_to(a2[..., :, None, :], full)
    ib = np.broadcast_to(np.swapaxes(b2, -1, -2)[..., None, :, :], full)
    rows = np.broadcast_to(np.arange(size).reshape(batch + (n, m, 1)), full)

    def nonzero(k_):
        c = np.asarray(rec.consts[k_])
        c = c[None, :] if c.ndim == 1 and k_ == 0 else (c[:, None] if c.ndim == 1 else c)
        return c != 0

    out = _empty(size, N)
    if pa is not None:
        keep = (np.broadcast_to(np.swapaxes(nonzero(1), -1, -2)[..., None, :, :], full)
                if pb is None else np.ones(full, dtype=bool))
        out = out + _select(size, rows[keep], ia[keep], pa)
    if pb is not None:
        keep = (np.broadcast_to(nonzero(0)[..., :, None, :], full)
                if pa is None else np.ones(full, dtype=bool))
        out = out + _select(size, rows[keep], ib[keep], pb)
    return out


def _along_axis_rule(rec, pats, shapes, out_shape, N):
    """``sort`` along ``axis``: which element lands where moves with the values,
    so an output element depends on its whole line along the axis."""
    axis = rec.params.get("axis", -1)
    shape = shapes[0]
    if axis is None:
        return _dense_rule(rec, pats, shapes, out_shape, N)
    axis %= max(len(shape), 1)
    n = shape[axis]
    src = np.moveaxis(_index_array(shape), axis, -1)          # (..., n)
    dst = np.moveaxis(_index_array(out_shape), axis, -1)
    rows = np.broadcast_to(dst[..., :, None], dst.shape + (n,))
    cols = np.broadcast_to(src[..., None, :], src.shape[:-1] + (n, n))
    size = int(np.prod(out_shape, dtype=np.int64))
    return _select(size, rows, cols, pats[0])


def _split_subscripts(subscripts: str):
    ins, out = subscripts.replace(" ", "").split("->")
    return ins.split(","), out


def _contraction_rule(rec, pats, shapes, out_shape, N):
    """An einsum-like contraction (``subscripts`` parameter): output element o
    depends on element e of operand k when some assignment of the summed
    labels agrees with both and meets only nonzero entries of the constant
    operands (traced operands count as nonzero everywhere)."""
    subscripts = rec.params.get("subscripts", "")
    size = int(np.prod(out_shape, dtype=np.int64))
    if "..." in subscripts or "->" not in subscripts:
        return _dense_rule(rec, pats, shapes, out_shape, N)
    ins, out = _split_subscripts(subscripts)
    dims = {}
    for lab, shape in zip(ins, shapes):
        dims.update(zip(lab, shape))
    result = _empty(size, N)
    for k, p in enumerate(pats):
        if p is None:
            continue
        labels = sorted(set(out) | set(ins[k]))
        pairs = size * int(np.prod(shapes[k], dtype=np.int64))
        if pairs > _MATMUL_PAIRS_LIMIT:
            return _dense_rule(rec, pats, shapes, out_shape, N)
        terms, masks = [], []
        for j, lab in enumerate(ins):
            if j == k:
                continue
            terms.append(lab)
            masks.append(np.ones(shapes[j]) if pats[j] is not None
                         else (np.asarray(rec.consts[j]) != 0).astype(float))
        for lab in labels:                      # every label reaches the output
            terms.append(lab)
            masks.append(np.ones(dims[lab]))
        T = np.einsum(",".join(terms) + "->" + "".join(labels), *masks) != 0
        # T over (out grid) x (operand k grid): label values from either side,
        # equal where a label appears on both sides or twice in operand k
        og = np.indices(out_shape).reshape(len(out_shape), -1, 1) if out else None
        eg = np.indices(shapes[k]).reshape(len(ins[k]), 1, -1)
        ok = np.ones((size, int(np.prod(shapes[k], dtype=np.int64))), dtype=bool)
        vals = []
        for lab in labels:
            v = None
            if lab in out:
                v = np.broadcast_to(og[out.index(lab)], ok.shape)
            for pos, c in enumerate(ins[k]):
                if c == lab:
                    w = np.broadcast_to(eg[pos], ok.shape)
                    if v is None:
                        v = w
                    else:
                        ok &= v == w
            vals.append(v)
        ok &= T[tuple(vals)] if labels else T
        rows, cols = np.nonzero(ok)
        result = result + _select(size, rows, cols, p)
    return result


class elementwise_in:
    """Elementwise in the arguments ``args`` only; no dependence on the others
    (``heaviside``'s ``x``, ``cos_given_sin``'s hint ``s``)."""

    def __init__(self, *args: int):
        self.args = frozenset(args)

    def __call__(self, rec, pats, shapes, out_shape, N):
        return _elementwise_rule(rec, [p if k in self.args else None
                                       for k, p in enumerate(pats)], shapes, out_shape, N)

    def __repr__(self):
        return f"elementwise_in{tuple(sorted(self.args))}"


def astype_rule(rec, pats, shapes, out_shape, N):
    """``astype``: the identity between float dtypes, no dependence to integer
    or bool dtypes (piecewise constant)."""
    if not np.issubdtype(rec.params["dtype"], np.inexact):
        return _zero_rule(rec, pats, shapes, out_shape, N)
    return _elementwise_rule(rec, pats, shapes, out_shape, N)


#: the rule functions, by family (primitives declare theirs with defsparsity)
DENSE = _dense_rule
#: the reason of DENSE for matrix functions (solve, inv, det, eigh...)
#: the reason a primitive that runs the user's code (loops, checkpoints, custom
#: rules) is structurally dense
USER_CODE = "runs the user's Python code: its dependences are not known before it runs"
MATRIX_FUNCTION = ("a matrix function: every entry of the result depends on every entry of "
                   "the matrix (a superset for a stack of matrices)")
ZERO = _zero_rule
ELEMENTWISE = _elementwise_rule
WHERE = _where_rule
PRODUCT = _product_rule
MOVE = _move_rule
INDEX_UPDATE = _index_update_rule
INDEX_ADD_ZEROS = _index_add_zeros_rule
REDUCTION = _reduction_rule
CUMULATIVE = _cumulative_rule
ALONG_AXIS = _along_axis_rule
MATMUL = _matmul_rule
CONTRACTION = _contraction_rule


def _row(p, j: int) -> np.ndarray:
    """Row ``j`` of a pattern (an index set or a CSR matrix) as an index set."""
    if type(p) is np.ndarray:
        return p
    return p.indices[p.indptr[j]:p.indptr[j + 1]].astype(np.int32, copy=False)


def _union(sets: list) -> np.ndarray:
    sets = [s for s in sets if len(s)]
    if not sets:
        return _EMPTY
    if len(sets) == 1:
        return sets[0]
    return np.unique(np.concatenate(sets)).astype(np.int32, copy=False)


def _one_element(rec, raw: list, shapes: list):
    """The pattern of a one-element node as an index set, without scipy.

    Scalar code on arrays (``x[k]``, 0-d and shape-(1,) arithmetic) makes many
    such nodes; the general rules would build sparse matrices for each.
    Returns None for rules without this shortcut.
    """
    rule = _rule_for(rec.prim)
    if rule is _zero_rule or (rule is astype_rule and not np.issubdtype(
            rec.params["dtype"], np.inexact)):
        return _EMPTY
    if rule is _product_rule:
        for k, p in enumerate(raw):
            if p is None and not isinstance(rec.consts[k], _core.Box) \
                    and not np.all(np.asarray(rec.consts[k]) != 0):
                return _EMPTY                    # times a constant 0
        return _union([_row_set(p) for p in raw if p is not None])
    if type(rule) is elementwise_in:
        return _union([_row_set(p) for k, p in enumerate(raw)
                       if p is not None and k in rule.args])
    if rule in (_elementwise_rule, _reduction_rule, _dense_rule, _along_axis_rule,
                astype_rule):
        # an element unions its operands' elements (all of them, for a
        # reduction to one element or the dense superset)
        return _union([_row_set(p) for p in raw if p is not None])
    if rule is _move_rule:
        args, parts, off = [], [], 0
        for p, shape in zip(raw, shapes):
            if p is None:
                args.append(np.full(shape, -1, dtype=np.intp))
            else:
                n = int(np.prod(shape, dtype=np.int64))
                args.append(_index_array(shape, off))
                parts.append((off, n, p))
                off += n
        (j,) = np.asarray(rec.prim.impl(*args, **rec.params)).ravel().tolist()
        for start, n, p in parts:
            if start <= j < start + n:
                return _row(p, j - start)
        return _EMPTY
    return None


def _rule_for(prim) -> Callable:
    """The primitive's declared rule; a primitive that declares none (the test
    over every primitive fails on those) gets the elementwise rule if it is
    elementwise, else the dense superset."""
    rule = getattr(prim, "sparsity", None)
    if rule is None:
        rule = _elementwise_rule if getattr(prim, "elementwise", False) else _dense_rule
    return rule


# ---------------------------------------------------------------------------
# propagation over a tape
# ---------------------------------------------------------------------------

def tape_sparsity(tape) -> tuple[list, int]:
    """Pattern of every node of ``tape`` over its inputs' elements.

    Returns
    -------
    (pats, N)
        ``pats[i]``: CSR matrix of shape (size of node i, N), a sorted int32
        index array for a scalar node, or None for a guard; N is the total
        number of input elements (inputs numbered in ``tape.inputs`` order).
    """
    op, a, b = tape.export_nodes()
    offsets, N = {}, 0
    for i in tape.inputs:
        size = 1 if op[i] == 0 else int(np.size(_core.concrete(tape.record(i).ans)))
        offsets[i] = (N, size)
        N += size

    def shape_of(j):
        return _shape(tape.record(j).ans) if op[j] == 1 else ()

    def object_rule(i, pats):
        if op[i] == _OP_ELEM:           # element b[i] of array node a[i]: that row
            return np.unique(_row(_as_csr(pats[a[i]], N), int(b[i]))).astype(np.int32)
        if i in offsets:
            off, size = offsets[i]
            if op[i] == 0:
                return np.array([off], dtype=np.int32)
            return sp.csr_array((np.ones(size), np.arange(off, off + size),
                                 np.arange(size + 1)), shape=(size, N))
        rec = tape.record(i)
        out_shape = _shape(rec.ans)
        if rec.prim is None:        # an input of another tape: no dependence here
            return _empty(int(np.prod(out_shape, dtype=np.int64)), N)
        parents = rec.parents
        shapes = [shape_of(j) if j >= 0 else _shape(c)
                  for j, c in zip(parents, rec.consts or (None,) * len(parents))]
        if int(np.prod(out_shape, dtype=np.int64)) == 1:
            fast = _one_element(rec, [None if j < 0 else pats[j] for j in parents], shapes)
            if fast is not None:
                return fast
        ppats = [None if j < 0 else _as_csr(pats[j], N) for j in parents]
        return _clean(_rule_for(rec.prim)(rec, ppats, shapes, out_shape, N))

    return _patterns.propagate(op, a, b, object_rule, _row_set), N


class _Unique:
    """A key atom equal only to itself: a value the key cannot compare."""
    __slots__ = ()


def _digest(v: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(v).view(np.uint8).ravel(),
                           digest_size=16).digest()


def _atoms(obj) -> tuple:
    """``obj`` (parameters, constants) flattened to comparable atoms, without
    recursion; anything unknown becomes a ``_Unique`` (the key never matches)."""
    out, stack = [], [obj]
    while stack:
        v = stack.pop()
        t = type(v)
        if v is None or v is Ellipsis or t in (bool, int, float, str):
            out.append((t.__name__, v))
        elif t is slice:
            out.append("slice")
            stack += [v.step, v.stop, v.start]
        elif t is tuple or t is list:
            out.append((t.__name__, len(v)))
            stack.extend(reversed(v))
        elif t is dict and all(type(k) is str for k in v):
            out.append(("dict", tuple(v)))
            stack.extend(reversed(list(v.values())))
        elif t is np.ndarray and v.dtype != object:
            out.append(("array", v.dtype.str, v.shape, _digest(v)))
        elif isinstance(v, np.generic) and t is not np.object_:
            out.append(("scalar", v.dtype.str, _digest(np.asarray(v))))
        elif isinstance(v, np.dtype):
            out.append(("dtype", v.str))
        else:
            out.append(_Unique())
    return tuple(out)


def recording_key(tape, out) -> tuple:
    """Everything the pattern of ``out`` on ``tape`` depends on: the tape's
    structure, and each object node's primitive, shape, parameters and
    constant arguments.  Two recordings with equal keys have the same
    pattern (scalar constants do not enter: the C loop does not read them);
    a value the key cannot compare makes it equal to no other key."""
    op, a, b = tape.export_nodes()
    parts = [op.tobytes(), a.tobytes(), b.tobytes(), tuple(tape.inputs),
             out.idx if type(out) is Tracer and out.tape is tape else None,
             int(np.size(_core.concrete(out)))]
    for i in np.flatnonzero(op == 1).tolist():
        rec = tape.record(i)
        parts.append((rec.prim, rec.parents, _shape(rec.ans), _atoms(rec.consts),
                      _atoms(rec.params)))
    return tuple(parts)


def _output_pattern(tape, out, n: int) -> sp.csr_array:
    """The (out size, n) boolean pattern of ``out`` on ``tape``."""
    if type(out) is Tracer and out.tape is tape:
        pats, N = tape_sparsity(tape)
        P = _as_csr(pats[out.idx], N)
        P = sp.csr_array(P, dtype=bool)
    else:
        P = sp.csr_array((int(np.size(_core.concrete(out))), n), dtype=bool)
    P.sum_duplicates()
    P.sort_indices()
    return P
