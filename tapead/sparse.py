"""Sparse derivatives: sparsity patterns read off a tape, colored Jacobians
and Hessians.

* :func:`jacobian_sparsity` -- the pattern of ``f``'s Jacobian, from one
  recording, without numbers.
* :func:`sparse_jacobian` -- ``x -> scipy.sparse.csr_array``: column coloring,
  one K-direction forward sweep (K = number of colors), recovery.
* :func:`hessian_sparsity`, :func:`sparse_hessian` -- the same for the
  Hessian: the pattern of the gradient's Jacobian (the gradient recorded on
  an outer tape), star or acyclic coloring, forward over reverse.

The patterns themselves (one rule per primitive, the C loop over scalar
nodes) are in :mod:`tapead.patterns`.

Patterns are structural and taken at the recorded point: a Python branch
on a traced value records only the branch taken, so a function whose
structure changes with ``x`` should be given a pattern computed elsewhere.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import scipy.sparse as sp

from tapead import coloring as _coloring
from tapead._core import Tracer
from tapead.patterns import _output_pattern, recording_key, tape_sparsity
from tapead.boxing import pooled
from tapead.program import Program
from tapead.transforms import grad

__all__ = ["jacobian_sparsity", "sparse_jacobian", "hessian_sparsity",
           "sparse_hessian", "tape_sparsity"]


def _vector(x, what: str) -> np.ndarray:
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            x = x.astype(float)
    if not isinstance(x, np.ndarray) or x.ndim != 1:
        raise ValueError(
            f"{what} needs a 1-d float array x, got {type(x).__name__} of shape "
            f"{np.shape(x)}; ravel the input (x.ravel()) and reshape inside f")
    if x.dtype.kind == "c":
        raise ValueError(f"{what} needs a real float array, got dtype {x.dtype}: sparse "
                         "derivatives with respect to complex inputs are not supported; "
                         "write f in terms of the real and imaginary parts "
                         "(x = np.concatenate([x.real, x.imag]))")
    if x.dtype.kind != "f":
        raise ValueError(f"{what} needs a float array, got dtype {x.dtype}; "
                         "pass x.astype(float)")
    return x


def _same_pattern(P: sp.csr_array, Q: sp.csr_array) -> bool:
    """Whether two canonical (sorted, duplicate-free) patterns are equal."""
    return (P.shape == Q.shape and np.array_equal(P.indptr, Q.indptr)
            and np.array_equal(P.indices, Q.indices))


def _tangents(tape, out, seed_t: np.ndarray, m: int) -> np.ndarray:
    """``(J @ S).T`` (K, m) by one K-direction forward sweep of the recorded
    tape (``Tape.forward_sweep`` visits only the nodes ``out`` depends on,
    so a gradient's tape skips the function's own value); ``seed_t`` is
    ``S.T`` (K, n), C-contiguous."""
    K = seed_t.shape[0]
    if K == 0 or not (type(out) is Tracer and out.tape is tape):
        return np.zeros((K, m))
    (t,) = tape.forward_sweep({tape.inputs[0]: seed_t}, [out.idx], K)
    if t is None:
        return np.zeros((K, m))
    return np.asarray(t, dtype=np.float64).reshape(K, m)


def _reverse(tape, out, seed: np.ndarray, n: int) -> np.ndarray:
    """``J.T @ seed`` (n, K) by K reverse sweeps of the recorded tape."""
    K = seed.shape[1]
    B = np.zeros((n, K))
    if not (type(out) is Tracer and out.tape is tape):
        return B
    shape = np.shape(out.primal)
    for k in range(K):
        s = float(seed[0, k]) if shape == () else seed[:, k].reshape(shape)
        (g,) = tape.backward([out.idx], [s], [tape.inputs[0]])
        if g is not None:
            B[:, k] = np.asarray(g, dtype=np.float64).reshape(n)
    return B


# ---------------------------------------------------------------------------
# the functional API
# ---------------------------------------------------------------------------

def jacobian_sparsity(f: Callable, x) -> sp.csr_array:
    """Sparsity pattern of the Jacobian of ``f`` at ``x``, without numbers.

    Parameters
    ----------
    f : callable
        R^n -> R^m: takes a 1-d array, returns a 1-d array or a scalar.
    x : ndarray, shape (n,)
        Where to record ``f`` (the pattern of the branch taken there).

    Returns
    -------
    scipy.sparse.csr_array of bool, shape (m, n)
        A superset of the nonzeros of the Jacobian.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> P = ta.jacobian_sparsity(lambda x: x[1:] * x[:-1], np.ones(4))
    >>> P.toarray().astype(int)
    array([[1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    x = _vector(x, "jacobian_sparsity")
    prog = Program.record(f, (x,), {}, 0, "jacobian_sparsity")
    tape, out = prog.tape, prog.out
    return _output_pattern(tape, out, x.size)


def hessian_sparsity(f: Callable, x) -> sp.csr_array:
    """Symmetric sparsity pattern of the Hessian of a scalar ``f`` at ``x``:
    the Jacobian pattern of ``grad(f)`` (recorded on an outer tape), ``P | P.T``.

    Returns
    -------
    scipy.sparse.csr_array of bool, shape (n, n)
    """
    x = _vector(x, "hessian_sparsity")
    prog = Program.record(grad(f), (x,), {}, 0, "hessian_sparsity")
    tape, out = prog.tape, prog.out
    return _symmetric(_output_pattern(tape, out, x.size))


def _symmetric(P: sp.csr_array) -> sp.csr_array:
    S = sp.csr_array(P + P.T, dtype=bool)
    S.sum_duplicates()
    S.sort_indices()
    return S


_COLORINGS = {"star": (_coloring.star_coloring, _coloring.star_recovery),
              "acyclic": (_coloring.acyclic_coloring, _coloring.acyclic_recovery)}


def sparse_jacobian(f: Callable, coloring: str = "column",
                    order: str = "auto") -> Callable:
    """The Jacobian of ``f`` as a sparse matrix, by coloring and forward mode.

    Every call records ``f`` once and pushes K = number of colors seed
    directions through the tape in one forward sweep, then reads the
    nonzeros off the compressed product ``J @ S``.  The pattern
    (:func:`jacobian_sparsity`) and its coloring are cached per input shape
    and reused while the recording has the same structure, parameters and
    constants (then its pattern is the same); a recording that differs (a
    Python branch, ``x[np.argsort(x)]``, a ``where`` on ``x > 0`` that
    picked other elements) gets its own pattern, and a new coloring if that
    pattern changed.

    Parameters
    ----------
    f : callable
        R^n -> R^m (1-d array in, 1-d array or scalar out).
    coloring : {"column", "row"}
        ``"column"``: distance-2 coloring of the columns, one forward sweep
        with K directions (``J @ S``); ``"row"``: of the rows, K reverse
        sweeps (``J.T @ S``) -- fewer colors when m << n.
    order : str
        Vertex order for the coloring (see :data:`tapead.coloring.ORDERS`);
        the default ``"auto"`` keeps the fewest colors over the orders (a
        few colorings at the first call, fewer directions at every call).

    Returns
    -------
    callable
        ``x -> scipy.sparse.csr_array`` of shape (m, n).  Attributes:
        ``recovery(x)`` gives the cached ``JacobianRecovery`` (``.ncolors``,
        ``.seed``) for x's shape.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> J = ta.sparse_jacobian(lambda x: x[1:] * x[:-1])(np.arange(1.0, 5.0))
    >>> J.toarray()
    array([[2., 1., 0., 0.],
           [0., 3., 2., 0.],
           [0., 0., 4., 3.]])
    """
    if coloring not in ("column", "row"):
        raise ValueError(f"sparse_jacobian: unknown coloring {coloring!r}; use "
                         "'column' or 'row' (star and acyclic colorings are for "
                         "Hessians: sparse_hessian)")
    rows = coloring == "row"
    cache: dict = {}

    def recovery_at(tape, out, x):
        key = (x.shape, x.dtype.str)
        rkey = recording_key(tape, out)
        entry = cache.get(key)
        if entry is not None and entry[0] == rkey:     # same recording: same pattern
            return entry[2:]
        P = _output_pattern(tape, out, x.size)
        if rows:                            # color the columns of J.T
            P = sp.csr_array(P.T)
            P.sort_indices()
        if entry is None or not _same_pattern(entry[1], P):
            colors = _coloring.column_coloring(P, order=order)
            rec = _coloring.jacobian_recovery(P, colors)
            entry = (rkey, P, rec, np.ascontiguousarray(rec.seed.T))
        cache[key] = (rkey,) + entry[1:]
        return entry[2:]

    @functools.wraps(f)
    @pooled                 # the recording's intermediates reuse the last call's memory
    def jac(x):
        x = _vector(x, "sparse_jacobian")
        prog = Program.record(f, (x,), {}, 0, "sparse_jacobian")
        tape, out = prog.tape, prog.out
        rec, seed_t = recovery_at(tape, out, x)
        if rows:
            B = _reverse(tape, out, rec.seed, x.size)
            return sp.csr_array(rec.to_sparse(rec.recover(B).astype(x.dtype, copy=False)).T)
        T = _tangents(tape, out, seed_t, rec.shape[0])
        return rec.to_sparse(rec.recover_tangents(T).astype(x.dtype, copy=False))

    def recovery(x):
        x = _vector(x, "sparse_jacobian")
        prog = Program.record(f, (x,), {}, 0, "sparse_jacobian")
        tape, out = prog.tape, prog.out
        return recovery_at(tape, out, x)[0]

    jac.recovery = recovery
    return jac


def sparse_hessian(f: Callable, coloring: str = "star",
                   order: str = "auto") -> Callable:
    """The Hessian of a scalar ``f`` as a sparse matrix, forward over reverse.

    The gradient ``grad(f)`` is recorded on an outer tape; its Jacobian
    pattern, symmetrized, is the Hessian pattern (cached per input shape
    with its coloring and recovery while the recording's structure,
    parameters and constants stay the same, read afresh when they differ).
    Each call records the gradient once and pushes K = number of colors
    directions through that tape in one forward sweep (``H @ S``) that
    visits only the nodes the gradient depends on (not ``f``'s own value),
    then recovers the nonzeros.  The gradient is
    recorded afresh at every call: a recorded gradient tape holds constants
    its rules derived from ``x`` (``sign(x)`` for ``abs``, the mask of
    ``maximum``, the branch a Python ``if`` took), which a replay at a new
    ``x`` would reuse silently.

    Parameters
    ----------
    f : callable
        R^n -> R, on a 1-d array.
    coloring : {"star", "acyclic"}
        Star: direct recovery; acyclic: fewer colors, recovery by
        substitution.
    order : str
        Vertex order for the coloring; the default ``"auto"`` keeps the fewest
        colors over the orders and, for star coloring, two algorithms (see
        :func:`tapead.coloring.star_coloring`).

    Returns
    -------
    callable
        ``x -> scipy.sparse.csr_array`` of shape (n, n); ``.recovery(x)``
        gives the cached recovery (``.ncolors``).

    Examples
    --------
    >>> import numpy as np, tapead as ta, tapead.numpy as tnp
    >>> f = lambda x: tnp.sum(tnp.sin(x[:-1] * x[-1]))
    >>> H = ta.sparse_hessian(f)
    >>> H.recovery(np.ones(5)).ncolors
    2
    """
    if coloring not in _COLORINGS:
        raise ValueError(f"sparse_hessian: unknown coloring {coloring!r}; use 'star' "
                         "or 'acyclic'")
    color_fn, recovery_fn = _COLORINGS[coloring]
    g = grad(f)
    cache: dict = {}

    def recovery_at(tape, out, x):
        key = (x.shape, x.dtype.str)
        rkey = recording_key(tape, out)
        entry = cache.get(key)
        if entry is not None and entry[0] == rkey:     # same recording: same pattern
            return entry[2:]
        P = _symmetric(_output_pattern(tape, out, x.size))
        if entry is None or not _same_pattern(entry[1], P):
            rec = recovery_fn(P, color_fn(P, order=order))
            entry = (rkey, P, rec, np.ascontiguousarray(rec.seed.T))
        cache[key] = (rkey,) + entry[1:]
        return entry[2:]

    @functools.wraps(f)
    @pooled
    def hess(x):
        x = _vector(x, "sparse_hessian")
        prog = Program.record(g, (x,), {}, 0, "sparse_hessian")
        tape, out = prog.tape, prog.out
        rec, seed_t = recovery_at(tape, out, x)
        T = _tangents(tape, out, seed_t, rec.shape[0])
        return rec.to_sparse(rec.recover_tangents(T).astype(x.dtype, copy=False))

    def recovery(x):
        x = _vector(x, "sparse_hessian")
        prog = Program.record(g, (x,), {}, 0, "sparse_hessian")
        tape, out = prog.tape, prog.out
        return recovery_at(tape, out, x)[0]

    hess.recovery = recovery
    return hess
