"""Op-spec rows of tapead.scipy.linalg (tapead/_prims/linalg_scipy.py).

``_sla(m)`` picks tapead.scipy.linalg, scipy.linalg or jax.scipy.linalg for
the namespace ``m``.  Triangular systems are drawn well-conditioned
(``U + 3 I``: diagonal at least 2); the Cholesky rows build the symmetric
positive definite ``x x^T + 3 I`` inside the body, and compare the factor's
triangle only (scipy leaves arbitrary values in the other one).
"""
from __future__ import annotations

from opspecs import REAL
from opspecs import _array_op as A
from opspecs_linalg import WC, _spd
from opspecs_reductions import _module


def _sla(m):
    """scipy.linalg for numpy, jax.scipy.linalg for jax, tapead.scipy.linalg."""
    name = _module(m)
    if name.startswith("tapead"):
        import tapead.scipy.linalg as sla
    elif name.startswith("jax"):
        import jax.scipy.linalg as sla
    else:
        import scipy.linalg as sla
    return sla


def _st(**kw):
    return lambda m, a, b: _sla(m).solve_triangular(a, b, **kw)


def _cho_factor(lower):
    def body(m, x):
        c, _ = _sla(m).cho_factor(_spd(m, x), lower=lower)
        return m.tril(c) if lower else m.triu(c)
    return body


def _cho_solve(lower):
    return lambda m, x, b: _sla(m).cho_solve(_sla(m).cho_factor(_spd(m, x), lower=lower), b)


TRI = (("vector", ((3, 3), (3,))), ("matrix", ((3, 3), (3, 2))))
SQ = ("square", ((3, 3),))

ARRAY_OPS = [
    A("solve_triangular_upper", _st(), *TRI, ("batched", ((2, 3, 3), (2, 3, 2))),
      domain=(WC, REAL)),
    A("solve_triangular_lower", _st(lower=True), *TRI, domain=(WC, REAL)),
    A("solve_triangular_trans", _st(trans=1, lower=True), *TRI, domain=(WC, REAL)),
    A("solve_triangular_trans_T_upper", _st(trans="T"), *TRI, domain=(WC, REAL)),
    A("solve_triangular_unit_diagonal", _st(lower=True, unit_diagonal=True), *TRI,
      domain=(REAL, REAL)),
    A("solve_triangular_unit_trans", _st(trans=2, unit_diagonal=True), *TRI,
      domain=(REAL, REAL)),
    A("cho_factor_lower", _cho_factor(True), SQ, ("wide", ((3, 4),))),
    A("cho_factor_upper", _cho_factor(False), SQ),
    A("cho_solve_lower", _cho_solve(True), ("vector", ((3, 3), (3,))),
      ("matrix", ((3, 4), (3, 2)))),
    A("cho_solve_upper", _cho_solve(False), ("matrix", ((3, 3), (3, 2)))),
    A("expm", lambda m, x: _sla(m).expm(0.5 * x), SQ, ("batched", ((2, 3, 3),)),
      ("one", ((1, 1),))),
]
