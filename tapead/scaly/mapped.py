"""Mapped calls: ``sc.vmap``, the ``expr.vmap`` op and its derivatives.

``sc.vmap(stage, n, inputs)`` builds one ``expr.vmap`` node per output of the
stage Function: stage ``k`` reads, from each operand, the window of the
stage input's size starting at ``start + k * stride`` of the flat operand
(``stride`` 0: the whole operand, a broadcast input), and the node holds
the ``n`` results one after the other (``slice_size`` elements each).

Derivatives stay mapped (``tapead.scaly.stage_derivatives`` builds the
stage Functions, cached per callee):

* reverse mode maps one stage adjoint Function ``<stage>_adj<out>_<in>``
  over the stages and adds the adjoints of the input windows back into the
  operand: windows that overlap are split into groups that do not (stage
  ``k`` in group ``k mod ceil(size / stride)``), each group is gathered
  and scattered, and the groups are added; a broadcast input's adjoint is
  the sum over stages, a product with a vector of ones;
* forward mode maps one stage derivative Function: tangents that are the
  same constant in every stage (colored seeds) are folded into its body
  (``<stage>_fwd<K>c<hex>_<out>_<in>``), any other tangent is one more
  mapped operand;
* the sparsity pattern of a mapped call is the stage's pattern placed at
  every stage's window (one sparse product per operand).

Evaluation runs a long mapped call whose stage is scalar code stage after
stage in C (``_core.scalar_scan``, as a loop without carries); other mapped
calls are expanded, one copy of the stage per stage
(``tapead.scaly.calls.expand_calls``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np
import scipy.sparse as sp

from tapead import _core
from tapead import coloring as _coloring
from tapead._prims.base import PER_DIRECTION, Primitive
from tapead.scaly import layout as lay
from tapead.scaly import stage_derivatives as _stages
from tapead.scaly.calls import EVALUATION_KEEPS, _spec
from tapead.scaly.sweeps import MASKED_VJPS
from tapead.errors import LayoutError
from tapead.scaly.expr import Expr, apply, const, gather, make_node, ones, reshape, scatter
from tapead.scaly.function import Function
from tapead.scaly.control.scalar import program_of, scan_in_c
from tapead.scaly.lower import LOWERINGS
from tapead.scaly.ops import register
from tapead.scaly.control.scalarize import scalarize
from tapead.scaly.sparsity import STAGE_JACOBIANS, Sparsity
from tapead.scaly.types import TensorType


# ---------------------------------------------------------------------------
# the op
# ---------------------------------------------------------------------------

def _vmap_infer(operands, attrs) -> TensorType:
    out = attrs["fn"].outputs[attrs["output"]].type
    return TensorType((attrs["length"] * attrs["slice_size"],), out.dtype)


def _stage_slice(value: np.ndarray, leaf: lay.Leaf, start: int) -> np.ndarray:
    size = leaf.type.size
    return value.reshape(-1)[start:start + size].reshape(leaf.type.shape)


def _vmap_fn(*values, fn, callee, length, output, slice_size, starts, strides):
    """Evaluate the stages on numbers, one after the other."""
    pieces = []
    for k in range(length):
        args = [_stage_slice(np.asarray(v), leaf, start + k * stride)
                for v, leaf, start, stride in zip(values, fn.input_leaves, starts, strides)]
        pieces.append(np.ravel(fn.evaluate(args)[output]))
    return np.concatenate(pieces)


def mapped(fn: Function, operands: Sequence[Expr], starts: Sequence[int],
           strides: Sequence[int], length: int, output: int = 0) -> Expr:
    """The ``expr.vmap`` node of ``fn``'s output ``output`` over ``length`` stages."""
    return make_node("vmap", list(operands), {
        "callee": fn.name, "fn": fn, "length": int(length), "output": int(output),
        "slice_size": fn.outputs[output].size, "starts": tuple(int(s) for s in starts),
        "strides": tuple(int(s) for s in strides)})


# -- reverse mode -------------------------------------------------------------

def _add_back(v: Expr, operand: Expr, start: int, stride: int, size: int, n: int) -> Expr:
    """The operand's adjoint from ``v``, the ``n`` adjoints of its windows
    (``size`` elements each, one stage after the other)."""
    if stride == 0:                         # every stage reads the same window
        stacked = reshape(gather(v, np.arange(n * size), (n * size,)), (n, size))
        total = apply("matmul", ones((n,)), stacked)
        if start == 0 and size == operand.size:
            return total if total.shape == operand.shape else reshape(total, operand.shape)
        return scatter(total, np.arange(start, start + size), operand.shape)
    groups = -(-size // stride) if stride < size else 1
    parts = []
    for r in range(min(groups, n)):
        ks = np.arange(r, n, groups)[:, None]
        src = (ks * size + np.arange(size)).ravel()
        dst = (start + ks * stride + np.arange(size)).ravel()
        parts.append(scatter(gather(v, src, (src.size,)), dst, operand.shape))
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _vmap_vjp(g: Expr, node: Expr, wanted: Sequence[bool]) -> List[Optional[Expr]]:
    """One mapped stage adjoint per operand asked for (see the module docstring)."""
    a = node.attrs
    fn, n, k = a["fn"], a["length"], a["output"]
    out = []
    for i, operand in enumerate(node.operands):
        adj = _stages.stage_adjoint(fn, k, i) if wanted[i] and operand.diff else None
        if adj is None:
            out.append(None)
            continue
        f, used = adj
        v = mapped(f, [node.operands[j] for j in used] + [g],
                   [a["starts"][j] for j in used] + [0],
                   [a["strides"][j] for j in used] + [a["slice_size"]], n)
        size = fn.input_leaves[i].type.size
        out.append(_add_back(v, operand, a["starts"][i], a["strides"][i], size, n))
    return out


# -- forward mode ---------------------------------------------------------------

def _windows(start: int, stride: int, size: int, n: int) -> np.ndarray:
    return start + np.arange(n)[:, None] * stride + np.arange(size)


def _seed_blocks(t: Expr, operand: Expr, start: int, stride: int, size: int, n: int,
                 k: Optional[int]):
    """``(block, value)`` for a constant tangent ``t`` of value ``value``: the
    tangent of one stage's window, ``(k, size)`` (``(size,)`` for one
    direction), when it is the same in every stage, else None; ``(None,
    None)`` when ``t`` is not a constant."""
    value = _stages.constant_value(t)
    if value is None:
        return None, None
    flat = value.reshape((k, operand.size) if k else (operand.size,))
    blocks = flat[..., _windows(start, stride, size, n)]          # (k,) n, size
    first = blocks[..., :1, :]
    if not np.array_equal(blocks, np.broadcast_to(first, blocks.shape)):
        return None, flat
    return np.ascontiguousarray(first[..., 0, :]), flat


def _vmap_jvp(ts: Sequence[Optional[Expr]], node: Expr, k: Optional[int]) -> Optional[Expr]:
    """The tangent of a mapped call (``k`` directions on a leading axis, or
    one direction when ``k`` is None): one mapped stage derivative."""
    a = node.attrs
    fn, n = a["fn"], a["length"]
    folded, passed, values = {}, [], {}
    for j, (t, operand) in enumerate(zip(ts, node.operands)):
        if t is None:
            continue
        size = fn.input_leaves[j].type.size
        block, values[j] = _seed_blocks(t, operand, a["starts"][j], a["strides"][j], size,
                                        n, k)
        if block is not None:
            folded[j] = block
        else:
            passed.append(j)
    if not folded and not passed:
        return None
    deriv = _stages.stage_derivative(fn, a["output"], k, folded, tuple(passed))
    if deriv is None:
        return None
    f, used = deriv
    kk = k or 1
    operands = [node.operands[j] for j in used]
    starts = [a["starts"][j] for j in used]
    strides = [a["strides"][j] for j in used]
    for j in passed:
        t, operand, value = ts[j], node.operands[j], values[j]
        if value is not None:       # seeds that differ between stages: one constant
            t = const(np.ascontiguousarray(value.T).reshape(-1) if k else value)
        elif k:     # direction-major (k, M) -> element-major (M, k): windows stay contiguous
            t = reshape(apply("transpose", reshape(t, (k, operand.size)), axes=(1, 0)),
                        (operand.size * k,))
        operands.append(t)
        starts.append(a["starts"][j] * kk)
        strides.append(a["strides"][j] * kk)
    v = mapped(f, operands, starts, strides, n)
    if not k:
        return v
    m = a["slice_size"]
    c, s, r = np.ogrid[:k, :n, :m]
    return gather(v, (s * k * m + c * m + r).ravel(), (k, n * m))


# -- sparsity pattern -----------------------------------------------------------

def _placeholder(shape) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    return (0.5 + 0.25 * np.sin(np.arange(1, size + 1, dtype=np.float64))).reshape(shape)


def _structure_impl(*values, fn, callee, length, output, slice_size, starts, strides):
    """What a mapped call records when a graph is lowered for its sparsity
    pattern: a placeholder of its shape (patterns do not depend on values)."""
    return _placeholder((length * slice_size,))


def _vmap_sparsity(rec, pats, shapes, out_shape, N):
    """Every stage's rows get the stage's pattern over its windows."""
    p = rec.params
    fn, n, m = p["fn"], p["length"], p["slice_size"]
    out = sp.csr_array((n * m, N))
    for j, P in enumerate(pats):
        if P is None:
            continue
        local = _stages.stage_pattern(fn, p["output"], j)
        if local.nnz == 0:
            continue
        r, c = local.nonzero()
        s = np.arange(n)[:, None]
        rows = (s * m + r).ravel()
        cols = (p["starts"][j] + s * p["strides"][j] + c).ravel()
        G = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n * m, P.shape[0]))
        out = out + G @ P
    return out


#: a mapped call in a graph lowered for its sparsity pattern (never evaluated)
structure_p = Primitive("scaly_vmap", _structure_impl, saves=())
structure_p.defsparsity(_vmap_sparsity)
structure_p.defbatched(PER_DIRECTION)


def _stage_jacobian(y: Expr, x: Expr):
    """``(compact values, Sparsity)`` of ``d y / d x`` from the stage's own
    pattern, when ``y`` is (a reshape of) a mapped call whose operands are
    ``x`` itself (once) or independent of it; else None.

    Stage ``s`` writes rows ``s * m ... s * m + m - 1`` of the Jacobian, and
    its nonzeros, in the stage's pattern order, are those rows' nonzeros in
    pattern order, so the global pattern and the gather come from the
    stage's ones without coloring anything of the global size.
    """
    while y.op == "reshape":
        y = y.operands[0]
    if y.op != "vmap":
        return None
    a = y.attrs
    fn, n, m, k = a["fn"], a["length"], a["slice_size"], a["output"]
    mine = [j for j, o in enumerate(y.operands) if o is x]
    if len(mine) != 1 or any(o is not x and _stages.depends_on(o, x) for o in y.operands):
        return None
    (j,) = mine
    local = _stages.stage_pattern(fn, k, j)
    start, stride = a["starts"][j], a["strides"][j]
    if local.nnz == 0:
        return None
    colors = np.asarray(_coloring.column_coloring(local), dtype=np.int64)
    K = int(colors.max()) + 1
    size = local.shape[1]
    seed = np.zeros((K, size))
    seed[colors, np.arange(size)] = 1.0
    deriv = _stages.stage_derivative(fn, k, K, {j: seed}, ())
    if deriv is None:
        return None
    f, used = deriv
    v = mapped(f, [y.operands[i] for i in used], [a["starts"][i] for i in used],
               [a["strides"][i] for i in used], n)
    r, c = local.nonzero()                          # CSR order within the stage
    s = np.arange(n)[:, None]
    rows = (s * m + r).ravel()
    cols = (start + s * stride + c).ravel()
    pattern = Sparsity(sp.csr_array((np.ones(rows.size, dtype=bool), (rows, cols)),
                                    shape=(n * m, x.size)))
    where = (s * (K * m) + colors[c] * m + r).ravel()
    return gather(v, where, (where.size,)), pattern


STAGE_JACOBIANS.append(_stage_jacobian)


# -- evaluation -------------------------------------------------------------------

#: a mapped call of at least this many stages whose stage runs as scalar code
#: is evaluated stage after stage in C; a shorter one is expanded
RUN_IN_C_FROM = 8


def _scalar_stage(fn: Function):
    """The stage as scalar operations (``scalarize``), or None (built once)."""
    return _stages.cached(fn, ("scalar",), lambda: scalarize(fn))


def _runs_in_c(node: Expr) -> bool:
    """Whether evaluation keeps this mapped call as one node (see ``_run_impl``)."""
    a = node.attrs
    return (a["length"] >= RUN_IN_C_FROM and all(o.dtype == np.float64 for o in node.operands)
            and _scalar_stage(a["fn"]) is not None)


def _run_impl(*values, fn, callee, length, output, slice_size, starts, strides):
    """The stages of a mapped call run in C (``_core.scalar_scan`` over the
    stage's scalar tape, no Python per stage): the windows are the per-step
    inputs of a loop without carries."""
    plan = _scalar_stage(fn)
    rows = np.arange(length)[:, None]
    columns = [np.ravel(np.asarray(_core.concrete(v), dtype=np.float64))[
        start + rows * stride + np.arange(leaf.type.size)]
        for v, leaf, start, stride in zip(values, fn.input_leaves, starts, strides)]
    xs = np.ascontiguousarray(np.concatenate(columns, axis=1))
    prog = program_of(plan, list(xs[0]))
    if prog is None:
        return _vmap_fn(*values, fn=fn, callee=callee, length=length, output=output,
                        slice_size=slice_size, starts=starts, strides=strides)
    ys = np.zeros((length, sum(y.size for y in fn.outputs)))
    scan_in_c(prog, np.zeros(0), xs, ys, np.zeros((0, 0)), np.arange(length, dtype=np.intp))
    first = sum(y.size for y in fn.outputs[:output])
    return np.ascontiguousarray(ys[:, first:first + slice_size]).reshape(-1)


#: a mapped call evaluated in C (a tape node of the program that evaluates it)
run_p = Primitive("scaly_vmap", _run_impl, saves=())
run_p.defsparsity(_vmap_sparsity)
run_p.defbatched(PER_DIRECTION)


def _lower_vmap(program, node: Expr, args: List[Any]) -> Any:
    prim = run_p if program._elementwise_ops else structure_p
    if any(isinstance(x, _core.Box) for x in args):
        return _core.bind(prim, *args, **node.attrs)
    return prim.impl(*args, **node.attrs)


register("vmap", _vmap_infer, _vmap_fn,
         jvp=lambda ts, node: _vmap_jvp(ts, node, None),
         jvp_many=lambda ts, node, k: _vmap_jvp(ts, node, k))
MASKED_VJPS["vmap"] = _vmap_vjp
LOWERINGS["vmap"] = _lower_vmap
EVALUATION_KEEPS[0] = _runs_in_c


# ---------------------------------------------------------------------------
# sc.vmap
# ---------------------------------------------------------------------------

def vmap(stage, n: int, inputs: Sequence[Any]):
    """``stage`` applied to ``n`` slices of its inputs: a mapped call.

    Parameters
    ----------
    stage : sc.Function
        The stage function; its input leaves, in order, match ``inputs``.
    n : int
        Number of stages.
    inputs : list
        One entry per input leaf of ``stage``: an expression of ``n`` times
        the leaf's size (stage ``k`` reads the ``k``-th slice of the flat
        array), an expression of the leaf's size (shared by every stage;
        ``sc.broadcast(p)`` says so explicitly), or a window
        ``sc.window(array, start, stride)`` or ``(array, start, stride)``
        (stage ``k`` reads the leaf's size of elements from
        ``start + k * stride``; windows may overlap).

    Returns
    -------
    Expr or tuple
        Per output of ``stage``, the stages' results stacked on a leading
        axis: shape ``(n,) + output shape`` (a tuple laid out like the stage's
        outputs for several outputs).  On numpy inputs the stages are
        evaluated right away and numpy arrays are returned.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def stage(x):
    ...     return (x * x).sum()
    >>> @sc.function(sc.L("z", 6), sc.L("s", ...))
    ... def mapped(z):
    ...     return sc.vmap(stage, 3, [z])
    >>> print(mapped(np.arange(6.0)))
    [ 1. 13. 41.]
    """
    if not isinstance(stage, Function):
        raise TypeError(f"sc.vmap needs an sc.Function as stage, got {stage!r}")
    stage.closed("sc.vmap")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"sc.vmap({stage.name}, n={n!r}): n is the number of stages, a "
                         "positive int")
    n = int(n)
    inputs = list(inputs)
    where = f"sc.vmap({stage.name}, {n}, ...)"
    if len(inputs) != len(stage.input_leaves):
        raise LayoutError(f"{where}: {stage.name} has {len(stage.input_leaves)} input "
                          f"leaves ({', '.join(stage.input_names)}), got {len(inputs)} "
                          "mapped inputs")
    specs = [_spec(s, leaf, n, where) for s, leaf in zip(inputs, stage.input_leaves)]
    operands = [e for e, _, _ in specs]
    for (e, _, _), node, leaf in zip(specs, stage.inputs, stage.input_leaves):
        if e.dtype != node.dtype:
            raise LayoutError(f"{where}: input '{leaf.name}' expects "
                              f"{node.type.dtype_name}, got {e.type.dtype_name}")
    starts = [s for _, s, _ in specs]
    strides = [s for _, _, s in specs]
    nodes = [mapped(stage, operands, starts, strides, n, k)
             for k in range(len(stage.outputs))]
    shapes = [(n,) + y.shape for y in stage.outputs]
    if all(e.op == "const" for e in operands):      # numbers in, numbers out
        values = [e.attrs["value"] for e in operands]
        outs = [_vmap_fn(*values, **node.attrs).reshape(shape)
                for node, shape in zip(nodes, shapes)]
    else:
        outs = [node if node.shape == shape else reshape(node, shape)
                for node, shape in zip(nodes, shapes)]
    return lay.unflatten([stage.output_layout], outs)[0]


__all__ = ["vmap", "mapped"]
