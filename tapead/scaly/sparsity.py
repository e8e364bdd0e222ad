"""Sparse derivatives in the graph API: patterns, colorings, compact values.

``sc.jacobian_sparsity(expr, sym)`` finds which entries of a Jacobian can be
nonzero without numbers: the (expanded, simplified) graph is lowered once
onto a tapead tape and the tape's pattern propagation runs over it (a C
loop of sorted index-set unions for scalar nodes, one rule per array
primitive; see ``tapead.sparse``).  ``sc.sparse_jacobian`` and
``sc.sparse_hessian`` color that pattern (``tapead.coloring``), build the
seed matrix S from the colors, differentiate the graph with one batched
forward pass carrying the colors as directions (``J S``, or ``H S`` over the
gradient's graph), and end with a fixed ``gather`` of the compressed product
into the nonzeros in pattern order, all computed when the derivative
Function is built.  The results are ordinary Functions with
``output_sparsities``.
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from tapead import coloring as _coloring
from tapead import patterns as _patterns
from tapead.scaly.sweeps import (pick as _pick, forward_tangents, forward_tangents_many,
                                      reverse_adjoints)
from tapead.errors import LayoutError, NonScalarGradientError
from tapead.scaly.expr import Expr, const, gather, reshape, scatter, stack, zeros
from tapead.scaly.graphs import topo_order
from tapead.scaly.function import Function, derived, leaf_like
from tapead.scaly.types import TensorType, dtypes
from tapead.scaly.calls import expand_calls
from tapead.scaly.lower import LoweredProgram
from tapead.scaly.simplify import simplify


class Sparsity:
    """A Boolean sparsity pattern of shape ``(rows, columns)``.

    The nonzeros are numbered in *pattern order*, row by row and by column
    within a row (CSR order); compact values follow that order.

    Attributes
    ----------
    shape : tuple of int
    nnz : int
    row, col : ndarray of int, shape (nnz,)
        Row and column of every nonzero, in pattern order.

    Parameters
    ----------
    pattern : array_like of bool, shape (rows, columns), or scipy.sparse matrix

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> p = sc.jacobian_sparsity(sc.stack([x[0] * x[2], x[1] ** 2]), x)
    >>> p, p.row, p.col
    (Sparsity(2x3, nnz=3), array([0, 0, 1]), array([0, 2, 1]))
    """

    __slots__ = ("_csr",)

    def __init__(self, pattern: Any):
        if not sp.issparse(pattern):
            pattern = np.asarray(pattern)
            if pattern.ndim != 2:
                raise ValueError(f"a sparsity pattern is a 2-d matrix, got shape "
                                 f"{pattern.shape}")
        csr = sp.csr_array(pattern, dtype=bool)
        csr.eliminate_zeros()
        csr.sum_duplicates()
        csr.sort_indices()
        self._csr = csr

    @property
    def shape(self) -> Tuple[int, int]:
        return tuple(self._csr.shape)

    @property
    def nnz(self) -> int:
        return int(self._csr.nnz)

    @property
    def row(self) -> np.ndarray:
        return np.repeat(np.arange(self.shape[0]), np.diff(self._csr.indptr))

    @property
    def col(self) -> np.ndarray:
        return self._csr.indices.astype(np.int64)

    def to_mask(self) -> np.ndarray:
        """The pattern as a dense Boolean numpy array."""
        return self._csr.toarray()

    def to_scipy(self) -> sp.csr_array:
        """The pattern as a ``scipy.sparse.csr_array`` of bool (a copy)."""
        return self._csr.copy()

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sparsity):
            return NotImplemented
        return self.shape == other.shape and (self._csr != other._csr).nnz == 0

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Sparsity({self.shape[0]}x{self.shape[1]}, nnz={self.nnz})"


def _pattern_arg(pattern: Any) -> sp.csr_array:
    return pattern._csr if isinstance(pattern, Sparsity) else Sparsity(pattern)._csr


# ---------------------------------------------------------------------------
# finding the pattern
# ---------------------------------------------------------------------------

def _generic_values(node: Expr) -> np.ndarray:
    """Where the graph is recorded: the pattern does not depend on the values
    (Scaly graphs have no branches), so any point away from special values
    (0, 1, integers) will do."""
    if node.dtype != dtypes.float64:
        return np.ones(node.shape, node.dtype)
    k = np.arange(1, node.size + 1, dtype=np.float64)
    return (0.5 + 0.25 * np.sin(k)).reshape(node.shape)


def _pattern(y: Expr, x: Expr) -> Sparsity:
    """Pattern of d y / d x over the flattened elements, shape (y.size, x.size)."""
    (y,) = simplify(expand_calls([y], keep_mapped=True))
    nodes = topo_order([y])
    if not x.diff or all(n is not x for n in nodes):
        return Sparsity(sp.csr_array((y.size, x.size), dtype=bool))
    inputs = [x] + [n for n in nodes if n.op == "input" and n is not x]
    with np.errstate(all="ignore"):
        prog = LoweredProgram(inputs, [y], [_generic_values(n) for n in inputs])
    ref = prog.output_node(0)
    if ref < 0:
        return Sparsity(sp.csr_array((y.size, x.size), dtype=bool))
    pats, total = _patterns.tape_sparsity(prog.tape)
    P = _patterns._as_csr(pats[ref], total)
    return Sparsity(sp.csr_array(P)[:, :x.size])


def jacobian_sparsity(expr: Expr, wrt: Expr) -> Sparsity:
    """Which entries of ``d expr / d wrt`` can be nonzero, without numbers.

    Parameters
    ----------
    expr : sc.Expr
        Any expression (calls to Functions are followed).
    wrt : sc.Expr
        An input symbol (``sc.sym``).

    Returns
    -------
    Sparsity
        Shape ``(expr.size, wrt.size)``, over the flattened elements.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> pattern = sc.jacobian_sparsity(sc.stack([x[0] * x[2], x[1] ** 2]), x)
    >>> print(pattern.to_mask().astype(int))
    [[1 0 1]
     [0 1 0]]
    """
    if not isinstance(expr, Expr) or not isinstance(wrt, Expr):
        raise TypeError("sc.jacobian_sparsity(expr, sym) takes two sc.Expr: an expression "
                        "and an input symbol made with sc.sym")
    if wrt.op != "input":
        raise LayoutError(f"sc.jacobian_sparsity: the second argument must be an input "
                          f"symbol (sc.sym), got {wrt!r}")
    return _pattern(expr, wrt)


def hessian_sparsity_expr(y: Expr, x: Expr) -> Tuple[Expr, Sparsity]:
    """The gradient expression of a scalar ``y`` and the Hessian pattern: the
    Jacobian pattern of the gradient plus its transpose."""
    g = reverse_adjoints(y, const(np.ones(y.shape)), [x])[0]
    P = _pattern(g, x)._csr
    return g, Sparsity(P + P.T)


# ---------------------------------------------------------------------------
# colorings on patterns (Scaly's names; the kernels are tapead.coloring's)
# ---------------------------------------------------------------------------

def column_coloring(pattern: Any, order: str = "natural") -> Tuple[int, ...]:
    """Greedy distance-2 column coloring: each column, in ``order``, takes the
    smallest color not used by an earlier column sharing a row with it.

    ``order`` is one of ``tapead.coloring.ORDERS`` (natural by default).

    Parameters
    ----------
    pattern : Sparsity or array_like of bool, shape (m, n)
    order : str

    Returns
    -------
    tuple of int
        One color per column, length ``n``.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> sc.column_coloring(np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=bool))
    (0, 0, 1)
    """
    return tuple(_coloring.column_coloring(_pattern_arg(pattern), order=order))


def star_coloring(pattern: Any, order: str = "natural") -> Tuple[int, ...]:
    """Star coloring of a symmetric pattern (Gebremedhin, Tarafdar, Manne &
    Pothen 2007, Algorithm 4.1): proper, and no path on four vertices uses
    only two colors, so every Hessian entry can be read directly.

    Parameters
    ----------
    pattern : Sparsity or array_like of bool, shape (n, n), symmetric
    order : str

    Returns
    -------
    tuple of int
        One color per column, length ``n``.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> arrow = np.eye(4, dtype=bool)
    >>> arrow[0, :] = arrow[:, 0] = True
    >>> sc.star_coloring(arrow)
    (0, 1, 1, 1)
    """
    return tuple(_coloring.star_coloring(_pattern_arg(pattern), order=order))


def acyclic_coloring(pattern: Any, order: str = "natural") -> Tuple[int, ...]:
    """Acyclic coloring of a symmetric pattern (no two-colored cycle); fewer
    colors than star, recovery by substitution
    (``sc.sparse_hessian(f, ..., coloring="acyclic")``).

    Parameters
    ----------
    pattern : Sparsity or array_like of bool, shape (n, n), symmetric
    order : str

    Returns
    -------
    tuple of int
        One color per column, length ``n``.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> arrow = np.eye(4, dtype=bool)
    >>> arrow[0, :] = arrow[:, 0] = True
    >>> sc.acyclic_coloring(arrow)
    (0, 1, 1, 1)
    """
    return tuple(_coloring.acyclic_coloring(_pattern_arg(pattern), order=order))


def color_groups(colors: Sequence[int]) -> Tuple[Tuple[int, ...], ...]:
    """The columns of each color, ``((columns of color 0), (of color 1), ...)``.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> sc.color_groups((0, 0, 1))
    ((0, 1), (2,))
    """
    return _coloring.color_groups(colors)


# ---------------------------------------------------------------------------
# compressed derivatives
# ---------------------------------------------------------------------------

def _compressed(y: Expr, x: Expr, rec, batched: bool = True) -> Expr:
    """Nonzeros in pattern order: the colors as forward directions
    (``B = J S``, shape (m, K)), then a fixed gather.

    ``batched``: one pass carrying the K directions on a leading axis (the
    direction-independent partials are shared); otherwise one pass per
    color, each with a constant 0/1 seed that simplification folds into
    the graph (scalar code stays scalar on the tape).
    """
    K, m = rec.ncolors, y.size
    if rec.nnz == 0 or K == 0:
        return zeros((rec.nnz,))
    seed_t = np.ascontiguousarray(rec.seed.T).reshape((K,) + x.shape)
    if batched:
        t = forward_tangents_many([y], {x.id: const(seed_t)}, K)[0]
    else:
        rows = [forward_tangents([y], {x.id: const(s)})[0] for s in seed_t]
        t = None if all(r is None for r in rows) else stack(
            [zeros((m,)) if r is None else reshape(r, (m,)) for r in rows], axis=0)
    if t is None:
        return zeros((rec.nnz,))
    flat = reshape(t, (K * m,))

    def in_flat(g):                                 # index into B (m, K), C order
        g = np.asarray(g, dtype=np.int64)
        return (g % K) * m + g // K
    if isinstance(rec, _coloring.AcyclicRecovery):
        return _substituted(flat, rec, in_flat)
    return gather_through(flat, in_flat(rec.gather), (rec.nnz,))


def gather_through(x: Expr, indices, shape) -> Expr:
    """``gather(x, indices, shape)`` with the reshapes and gathers that ``x``
    is made of folded into the indices (one gather of their source: a mapped
    derivative's values go straight into pattern order)."""
    idx = np.asarray(indices, dtype=np.int64)
    while x.op in ("reshape", "gather"):
        if x.op == "gather":
            idx = np.asarray(x.attrs["indices"], dtype=np.int64)[idx]
        x = x.operands[0]
    return gather(x, idx, shape)


def _substituted(flat: Expr, rec, in_flat) -> Expr:
    """The acyclic recovery as expressions: the diagonal is a gather, and each
    off-diagonal value is solved along its 2-colored tree, leaves first, as
    ``tapead.coloring.AcyclicRecovery`` does (one scalar node per value)."""
    values = [None] * rec.nnz
    diag = gather(flat, in_flat(rec.diag_gather), (len(rec.diag_pos),))
    for j, pos in enumerate(rec.diag_pos):
        values[pos] = diag[j]
    sources = in_flat(rec.gather)
    for t in range(len(rec.tree_ptr) - 1):
        acc: dict = {}                              # solved values summed per vertex
        for k in range(rec.tree_ptr[t], rec.tree_ptr[t + 1]):
            a, w, p, q = (int(v) for v in rec.plan[k])
            val = flat[int(sources[k])]
            prev = acc.pop(a, None)
            if prev is not None:
                val = val - prev
            acc[w] = val if w not in acc else acc[w] + val
            values[p] = values[q] = val
    return stack(values)


def dense_jacobian_expr(y: Expr, x: Expr) -> Expr:
    """The dense ``(y.size, x.size)`` Jacobian of ``y``: the compressed
    product of a column coloring, scattered into place.  A dense pattern
    gets one direction per column; a sparse one (a banded Hessian) a few."""
    pattern = _pattern(y, x)
    if pattern.nnz == 0:
        return zeros((y.size, x.size))
    rec = _coloring.jacobian_recovery(pattern._csr, column_coloring(pattern))
    positions = pattern.row * x.size + pattern.col
    return scatter(_compressed(y, x, rec, batched=False), positions, (y.size, x.size))


def _sparse_function(f: Function, kind: str, out: str, inp: str, value: Expr,
                     pattern: Sparsity) -> Function:
    label = f"{kind}_{out}_{inp}"
    leaf = leaf_like(f.style, label, TensorType(value.shape))
    fn = derived(f"{f.name}_{label}", f.params, leaf, f.inputs, [value], f.style)
    fn.output_sparsities = [pattern]
    return fn


def sparse_jacobian(f: Function, out: str, inp: str, order: str = "natural") -> Function:
    """``f_spjac_<out>_<inp>``: the nonzeros of the Jacobian, in pattern order.

    The pattern (``output_sparsities[0]``, shape ``(out.size, inp.size)``)
    is colored with :func:`column_coloring`; one batched forward pass with a
    direction per color computes ``J S``, and a fixed gather picks entry
    (i, j) from row i of column color(j).  When the output is a mapped call
    (``sc.vmap``) whose every input is ``inp`` itself or independent of it,
    the stage's own pattern is colored instead: the result is one mapped
    call of the stage derivative, with the stage's seeds folded in, and one
    gather into pattern order.

    Parameters
    ----------
    f : sc.Function
    out, inp : str
        Names of an output and an input of ``f``.
    order : str
        Column order of the greedy coloring (see :func:`column_coloring`).

    Returns
    -------
    sc.Function
        Named ``f_spjac_<out>_<inp>``, returning the ``nnz`` nonzeros as a
        1-d array in pattern order; ``.output_sparsities[0]`` is the pattern
        (its ``row``/``col`` say where each value goes).

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 3), sc.L("y", ...))
    ... def v(x):
    ...     return sc.stack([x[0] * x[2], x[1] ** 2, 2.0 * x[0] + x[2] ** 2])
    >>> spjac = sc.sparse_jacobian(v, "y", "x")
    >>> pattern = spjac.output_sparsities[0]
    >>> print(spjac(np.array([1.0, 2.0, 3.0])), pattern.row, pattern.col)
    [3. 1. 4. 2. 6.] [0 0 1 2 2] [0 2 1 0 2]
    """
    y, x = _pick(f, out, inp)
    if order == "natural" and STAGE_JACOBIANS:
        found = STAGE_JACOBIANS[0](y, x)
        if found is not None:
            value, pattern = found
            return _sparse_function(f, "spjac", out, inp, value, pattern)
    pattern = _pattern(y, x)
    colors = column_coloring(pattern, order=order)
    rec = _coloring.jacobian_recovery(pattern._csr, colors)
    return _sparse_function(f, "spjac", out, inp, _compressed(y, x, rec), pattern)


#: ``[rule(y, x) -> (compact values, Sparsity) or None]``: the sparse Jacobian of
#: a mapped call from its stage's own pattern (``tapead.scaly.mapped``)
STAGE_JACOBIANS: list = []


_HESSIAN_COLORINGS = ("star", "acyclic", "column")


def sparse_hessian(f: Function, out: str, inp: str, coloring: str = "star",
                   order: str = "natural") -> Function:
    """``f_sphess_<out>_<inp>``: the nonzeros of the Hessian, in pattern order.

    Forward over reverse: the gradient's graph is built by reverse mode, its
    Jacobian pattern plus the transpose is the (symmetric) Hessian pattern
    (``output_sparsities[0]``), colored by :func:`star_coloring`, and one
    batched forward pass over the gradient with a direction per color gives
    ``H S``.  Entry (i, j) is read from row i of column color(j) when no
    other column of that color has an entry in row i, and otherwise from row
    j of column color(i).  ``coloring="acyclic"`` needs fewer colors and
    solves the off-diagonal values along 2-colored trees (substitution, a
    scalar node per value); ``coloring="column"`` treats H as a Jacobian
    (distance-2 coloring, more directions).

    Parameters
    ----------
    f : sc.Function
    out : str
        A scalar output of ``f``.
    inp : str
        An input of ``f``.
    coloring : {"star", "acyclic", "column"}
    order : str
        Vertex order of the coloring.

    Returns
    -------
    sc.Function
        Named ``f_sphess_<out>_<inp>``, returning the ``nnz`` nonzeros of the
        ``(inp.size, inp.size)`` Hessian in pattern order.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 3), sc.L("y", ...))
    ... def q(x):
    ...     return (x[0] * x[1]).sin() + x[2] ** 3
    >>> sphess = sc.sparse_hessian(q, "y", "x")
    >>> print(sphess.output_sparsities[0].to_mask().astype(int))
    [[1 1 0]
     [1 1 0]
     [0 0 1]]
    >>> print(sphess(np.array([0.0, 1.0, 2.0])))
    [ 0.  1.  1.  0. 12.]
    """
    if coloring not in _HESSIAN_COLORINGS:
        raise ValueError(f"sc.sparse_hessian: unknown coloring {coloring!r}; use 'star' "
                         "(direct recovery), 'acyclic' (fewer colors, recovery by "
                         "substitution) or 'column'")
    y, x = _pick(f, out, inp)
    if y.size != 1:
        raise NonScalarGradientError(
            f"sc.sparse_hessian({f.name}, {out!r}, {inp!r}): output '{out}' has shape "
            f"{y.shape}, not a single element")
    g, pattern = hessian_sparsity_expr(y, x)
    if coloring == "star":
        colors = star_coloring(pattern, order=order)
        rec = _coloring.star_recovery(pattern._csr, colors)
    elif coloring == "acyclic":
        colors = acyclic_coloring(pattern, order=order)
        rec = _coloring.acyclic_recovery(pattern._csr, colors)
    else:
        colors = column_coloring(pattern, order=order)
        rec = _coloring.jacobian_recovery(pattern._csr, colors)
    return _sparse_function(f, "sphess", out, inp, _compressed(g, x, rec), pattern)


__all__ = ["Sparsity", "jacobian_sparsity", "column_coloring", "star_coloring",
           "acyclic_coloring", "color_groups", "sparse_jacobian", "sparse_hessian"]
