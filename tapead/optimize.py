"""``scipy.optimize.minimize`` with exact derivatives from tapead.

The objective and its gradient come from one recording and one reverse
sweep (:func:`tapead.value_and_grad`, passed as ``jac=True`` so scipy reuses
the value); the Hessian, when the method takes one, is sparse
(:func:`tapead.sparse_hessian`) if its pattern at ``x0`` is sparse, dense
(:func:`tapead.hessian`) otherwise; methods built on Hessian-vector products
get :func:`tapead.hvp`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.optimize

from tapead.sparse import _vector, hessian_sparsity, sparse_hessian
from tapead.transforms import hessian as _dense_hessian, hvp, value_and_grad

__all__ = ["minimize"]

#: methods (lower case) that accept a gradient
_JAC = frozenset(["cg", "bfgs", "newton-cg", "l-bfgs-b", "tnc", "slsqp", "dogleg",
                  "trust-ncg", "trust-krylov", "trust-exact", "trust-constr"])
#: methods that accept a Hessian, and those that accept a sparse one
_HESS = frozenset(["newton-cg", "dogleg", "trust-ncg", "trust-krylov", "trust-exact",
                   "trust-constr"])
_SPARSE_HESS = frozenset(["trust-constr"])
#: methods that run on Hessian-vector products (preferred there: no Hessian formed)
_HESSP = frozenset(["newton-cg", "trust-ncg", "trust-krylov"])

_MODES = ("auto", "sparse", "dense", "hessp", "none")


def minimize(fun: Callable, x0, method: str = "trust-constr", *, args: tuple = (),
             hessian: str = "auto", density: float = 0.1, **kw):
    """Minimize ``fun(x, *args)`` with :func:`scipy.optimize.minimize` and
    exact derivatives.

    Parameters
    ----------
    fun : callable
        R^n -> R, written with tapead-differentiable operations.
    x0 : array_like, shape (n,)
        Starting point (1-d; ravel and reshape inside ``fun`` otherwise).
    method : str
        Any method of ``scipy.optimize.minimize``; derivative-free methods get
        no derivatives.
    args : tuple
        Extra arguments of ``fun`` (constants, not differentiated).
    hessian : {"auto", "sparse", "dense", "hessp", "none"}
        ``"auto"``: for ``trust-constr`` a sparse Hessian when the pattern at
        ``x0`` has at most ``density * n**2`` entries, else dense; for
        Newton-CG, trust-ncg and trust-krylov Hessian-vector products; for
        dogleg and trust-exact a dense Hessian.
    density : float
        Threshold of the ``"auto"`` choice.
    **kw
        Passed to ``scipy.optimize.minimize`` (``jac``, ``hess`` or ``hessp``
        given here override tapead's).

    Returns
    -------
    scipy.optimize.OptimizeResult
    """
    if hessian not in _MODES:
        raise ValueError(f"minimize: hessian={hessian!r}; use one of {_MODES}")
    x0 = _vector(np.asarray(x0, dtype=float) if not isinstance(x0, np.ndarray)
                 or x0.dtype.kind != "f" else x0, "minimize")
    m = method.lower() if isinstance(method, str) else method
    f = (lambda x: fun(x, *args)) if args else fun
    vg = value_and_grad(f)

    def fun_and_grad(x):
        v, g = vg(np.asarray(x, dtype=float))
        return float(v), np.asarray(g, dtype=float)

    if m in _JAC and "jac" not in kw:
        kw["jac"] = True
        objective = fun_and_grad
    else:
        objective = lambda x: float(f(np.asarray(x, dtype=float)))  # noqa: E731
    if m in _HESS and "hess" not in kw and "hessp" not in kw and hessian != "none":
        mode = hessian
        if mode == "auto":
            if m in _HESSP:
                mode = "hessp"
            elif m in _SPARSE_HESS:
                n = x0.size
                nnz = hessian_sparsity(f, x0).nnz
                mode = "sparse" if nnz <= density * n * n else "dense"
            else:
                mode = "dense"
        if mode == "sparse" and m not in _SPARSE_HESS:
            raise ValueError(f"minimize: method {method!r} needs a dense Hessian; "
                             "use hessian='dense' (or 'hessp' where it applies), or "
                             "method='trust-constr' for a sparse one")
        if mode == "hessp" and m not in _HESSP | _SPARSE_HESS:
            raise ValueError(f"minimize: method {method!r} takes no hessp; use "
                             "hessian='dense'")
        if mode == "sparse":
            kw["hess"] = sparse_hessian(f)
        elif mode == "dense":
            dense = _dense_hessian(f)
            kw["hess"] = lambda x: np.asarray(dense(np.asarray(x, dtype=float)))
        else:
            kw["hessp"] = lambda x, p: np.asarray(hvp(f, (np.asarray(x, dtype=float),),
                                                      (np.asarray(p, dtype=float),)))
    return scipy.optimize.minimize(objective, x0, method=method, **kw)
