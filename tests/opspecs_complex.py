"""Op-spec rows for complex intermediates: real -> complex -> real.

Each row is a real-valued function of real inputs that passes through
complex values, written once as ``body(m, *args)`` against a numpy-like
namespace (``numpy`` on tapead's tracers, ``jax.numpy`` for the reference).
``tests/test_complex.py`` checks every row in grad, jvp, vjp, jacfwd, jacrev
and hessian against central differences and against JAX.

A row: ``name``, ``body``, ``domain`` (one sampler per argument, smooth
points only: away from ``abs``'s kink at 0 and ``angle``'s branch cut),
``kinds`` (input shapes per kind, as in ``opspecs.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple

import numpy as np

#: opspecs.py joins every opspecs_*.py's ARRAY_OPS into its real-valued table;
#: these rows have their own checks (COMPLEX_SPECS), so they add none.  Defined
#: before importing opspecs, which imports this module back.
ARRAY_OPS: list = []

from opspecs import AwayFromZero, Interval  # noqa: E402

REAL = Interval(-1.5, 1.5)
POS = Interval(0.3, 2.0)
C = np.array([[0.5 + 1.0j, -0.25j, 1.0], [0.3, 1.0 - 0.5j, 0.2j], [-1.0j, 0.4, 0.7 + 0.1j]])

UNARY_KINDS = (("scalar", ((),)), ("array", ((2, 3),)))
BINARY_KINDS = (("scalar", ((), ())), ("array", ((2, 3), (2, 3))),
                ("bcast", ((3,), (2, 3))))
ARRAY_KINDS = (("array", ((2, 3),)),)


@dataclass(frozen=True)
class ComplexSpec:
    name: str
    body: Callable
    domain: Tuple
    kinds: Tuple

    def __repr__(self):
        return f"ComplexSpec({self.name})"

    def sample(self, rng, shapes):
        return tuple(float(d.sample(rng, s)) if s == () else np.asarray(d.sample(rng, s))
                     for d, s in zip(self.domain, shapes))


def _row(name, body, *domain, kinds=None):
    kinds = kinds or (UNARY_KINDS if len(domain) == 1 else BINARY_KINDS)
    return ComplexSpec(name, body, domain, kinds)


R = _row
COMPLEX_SPECS = [
    # the three worked examples: |i x| = |x|, |e^{ix} x| = |x|, |e^{ix}| = 1
    R("abs_1j", lambda m, x: m.abs(1j * x), AwayFromZero(0.2, 1.5)),
    R("abs_exp_times_x", lambda m, x: m.abs(m.exp(1j * x) * x), AwayFromZero(0.2, 1.5)),
    R("abs_exp", lambda m, x: m.abs(m.exp(1j * x)), REAL),
    # abs of a genuinely complex value, and |z|^2
    R("abs_z", lambda m, x, y: m.abs(x + 1j * y), AwayFromZero(0.3, 1.5), REAL),
    R("abs_z_squared", lambda m, x, y: m.abs((x - 2j * y) * (y + 0.5j)) ** 2, REAL, REAL),
    # real / imag / conj / angle
    R("real_mul", lambda m, x, y: m.real((x + 1j * y) * (y - 2j * x)), REAL, REAL),
    R("imag_div", lambda m, x, y: m.imag((x + 1j) / (y - 0.5j)), REAL, REAL),
    R("conj_mul", lambda m, x, y: m.real(m.conj(x + 1j * y) * (x * x + 2j * y)), REAL, REAL),
    R("imag_conj", lambda m, x: m.imag(m.conj(m.exp(1j * x) * (1.0 + x))), REAL),
    R("angle", lambda m, x, y: m.angle(x + 1j * y), POS, REAL),
    R("angle_exp", lambda m, x: m.angle(m.exp(0.5j * x) * (2.0 + x)), REAL),
    # + - * / ** and unary minus with complex constants and values
    R("arith", lambda m, x, y: m.real((x - 1j * y) * (2.0 + 1j) - (y + 0.5j) / (1.5 - 1j * x)
                                      + (-(x * 1j))), REAL, REAL),
    R("pow_int", lambda m, x, y: m.real((x + 1j * y) ** 3), REAL, REAL),
    R("pow_real_exponent", lambda m, x, y: m.imag((x + 1j) ** y), POS, REAL),
    R("pow_complex_exponent", lambda m, x, y: m.real(y ** (1j * x)), REAL, POS),
    R("negative_base", lambda m, x, y: m.real((-0.5 - x) ** (1j * y)) + m.imag((-1.5) ** (0.5j * y)),
      POS, REAL),
    R("rpow_complex", lambda m, x: m.imag((1.5 + 0.5j) ** x), REAL),
    # holomorphic functions of complex values
    R("exp_log", lambda m, x, y: m.real(m.log(x + 1j * y)) + m.imag(m.exp(y + 1j * x)),
      POS, REAL),
    R("sqrt", lambda m, x, y: m.imag(m.sqrt(x + 1j * y)), POS, REAL),
    R("trig", lambda m, x, y: m.abs(m.sin(x + 1j * y)) + m.real(m.cos(y - 0.5j * x))
      + m.imag(m.tan(0.3 * x + 0.2j * y)), REAL, REAL),
    R("hyperbolic", lambda m, x: m.real(m.tanh(0.5j * x) + m.sinh(x + 0.3j) * m.cosh(1j * x)),
      REAL),
    R("square_reciprocal", lambda m, x: m.imag(m.square(x + 2j) + m.reciprocal(1.0 + 1j * x)),
      REAL),
    R("expm1_log1p", lambda m, x: m.real(m.expm1(1j * x) * m.log1p(0.5j * x)), REAL),
    R("exp2_log2_log10", lambda m, x: m.real(m.exp2(0.5j * x) + m.log2(2.0 + 1j * x)
                                             - m.log10(1.0 - 0.5j * x) + m.positive(1j * x)),
      REAL),
    # reductions, matmul, indexing, broadcasting, concatenation, where
    R("sum", lambda m, x, y: m.abs(m.sum(m.exp(1j * x) * y)), REAL, POS),
    R("mean_axis", lambda m, x: m.real(m.mean(m.exp(1j * x) * x, axis=-1)), REAL,
      kinds=ARRAY_KINDS),
    R("matmul_const", lambda m, x: m.abs(m.exp(1j * x) @ C), REAL, kinds=ARRAY_KINDS),
    R("matmul_both", lambda m, x: m.real((x + 1j * x[::-1]) @ (x * 1j).T), REAL,
      kinds=ARRAY_KINDS),
    R("index_shift", lambda m, x: m.real(m.exp(1j * x)[..., 1:] * m.conj(m.exp(1j * x)[..., :-1])),
      REAL, kinds=ARRAY_KINDS),
    R("concat_mixed", lambda m, x: m.abs(m.concatenate([x, 1j * x + 0.5], axis=-1)),
      AwayFromZero(0.2, 1.5), kinds=ARRAY_KINDS),
    R("stack_mixed", lambda m, x: m.imag(m.stack([x * x, m.exp(1j * x)]) * (1.0 + 2.0j)),
      REAL, kinds=ARRAY_KINDS),
    R("where_complex", lambda m, x, y: m.real(m.where(np.array([True, False, True]),
                                                      m.exp(1j * x), y * (1 - 1j)) * (2 + 1j)),
      REAL, REAL, kinds=(("array", ((3,), (3,))), ("bcast", ((), (2, 3))))),
    R("norm", lambda m, x: m.linalg.norm(m.exp(1j * x) * x + 0.5j), REAL),
    R("norm_axis", lambda m, x: m.linalg.norm((x + 1j) * x, axis=-1), REAL, kinds=ARRAY_KINDS),
    R("norm_fro", lambda m, x: m.linalg.norm(m.exp(1j * x) + x, ord="fro"), REAL,
      kinds=ARRAY_KINDS),
    R("var_std", lambda m, x: m.var(m.exp(1j * x) * x, axis=-1) + m.std(1j * x + x * x),
      REAL, kinds=ARRAY_KINDS),
    R("einsum_mixed", lambda m, x: m.abs(m.einsum("ij,jk->ik", x, C) + m.einsum("ij,ij->i", x, 1j * x)[:, None]),
      REAL, kinds=ARRAY_KINDS),
    R("tensordot_inner", lambda m, x: m.real(m.tensordot(m.exp(1j * x), C, axes=1))
      + m.sum(m.imag(m.inner(x * (1 + 2j), m.exp(1j * x)))), REAL, kinds=ARRAY_KINDS),
    R("dot_nd", lambda m, x: m.real(m.dot(m.exp(1j * x)[None], x.T[None] * (1 - 1j))),
      REAL, kinds=ARRAY_KINDS),
    R("cumsum", lambda m, x: m.abs(m.cumsum(m.exp(1j * x) * x, axis=-1) + 2.0), REAL,
      kinds=ARRAY_KINDS),
    R("matmul_real_operand", lambda m, x: m.abs(x @ C) + m.real(C[:2, :2] @ (1j * x)),
      REAL, kinds=ARRAY_KINDS),
    R("matmul_vectors", lambda m, x: m.imag(x[0] @ m.exp(1j * x[1])) + m.real((1j * x[1]) @ x[0]),
      REAL, kinds=ARRAY_KINDS),
    R("real_of_matmul", lambda m, x: m.real(C @ (x[0] + 1j * x[1])), REAL, kinds=ARRAY_KINDS),
    # inverse hyperbolic functions of complex values, off their branch cuts
    # (arcsinh: Im z in (-1, 1); arctanh: Re z in (-1, 1); arccosh: Im z != 0)
    R("arcsinh_arctanh", lambda m, x, y: m.real(m.arcsinh(x + 0.6j * y))
      + m.imag(m.arctanh(0.5 * x + 0.3j * y)) + m.abs(m.arcsinh(0.4j * x - y)), REAL, REAL),
    R("arccosh", lambda m, x, y: m.real(m.arccosh(x + 1j * y)) + m.imag(m.arccosh(x + 1j * y)),
      POS, AwayFromZero(0.3, 1.5)),
    R("arccosh_left_half", lambda m, x, y: m.real(m.arccosh(-x + 1j * y))
      + m.imag(m.arccosh(-x + 1j * y)), POS, AwayFromZero(0.3, 1.5)),
    # scipy.special's error functions take complex values (JAX's do not)
    R("erf_erfc", lambda m, x, y: m.real(_sps(m).erf(x + 0.7j * y))
      + m.imag(_sps(m).erfc(0.5 * x - 1j * y)) + m.abs(_sps(m).erf(1j * x)), REAL, REAL),
    # reductions of complex values: max/min in numpy's (and JAX's) lexicographic
    # order, prod holomorphic
    R("max_min", lambda m, x, y: m.abs(m.max(x + 1j * y)) + m.real(m.min((x + 1j * y) * (1 - 1j)))
      + m.imag(m.max(m.exp(1j * x) + y, axis=0)) + m.sum(m.abs(m.min(x * 1j + y, axis=-1))),
      REAL, REAL, kinds=(("array", ((2, 3), (2, 3))),)),
    R("prod", lambda m, x, y: m.abs(m.prod(x + 1j * y, axis=-1)) + m.real(m.prod(m.exp(1j * x)))
      + m.imag(m.prod((x + 0.5j) * y)), REAL, REAL, kinds=(("array", ((2, 3), (2, 3))),)),
    # decompositions of complex matrices, through phase-invariant quantities
    R("eigh_hermitian", lambda m, x, y: _eigh_loss(m, x + 1j * y), REAL, REAL,
      kinds=(("square", ((3, 3), (3, 3))),)),
    R("svd_complex", lambda m, x, y: _svd_loss(m, x + 1j * y), REAL, REAL,
      kinds=(("square", ((3, 3), (3, 3))), ("tall", ((4, 2), (4, 2))),
             ("wide", ((2, 4), (2, 4))))),
    R("svdvals_complex", lambda m, x, y: m.linalg.svd(x + 1j * y, compute_uv=False) ** 2,
      REAL, REAL, kinds=(("square", ((3, 3), (3, 3))), ("tall", ((4, 2), (4, 2))))),
    R("eigvals", lambda m, x, y: _eigvals_loss(m, _eig(m, x + 1j * y)[0]), REAL, REAL,
      kinds=(("square", ((3, 3), (3, 3))),)),
    R("eigvals_of_real", lambda m, x: _eigvals_loss(m, _eig(m, x)[0]), REAL,
      kinds=(("square", ((3, 3),)),)),
    R("eig_vectors", lambda m, x, y: _eig_loss(m, x + 1j * y), REAL, REAL,
      kinds=(("square", ((3, 3), (3, 3))),)),
]
del R

#: rows without a JAX counterpart: JAX's erf refuses complex values, JAX's
#: arccosh has the wrong sign on the left half plane (its rule is 1/sqrt(z^2 - 1),
#: whose branch differs from arccosh's there; finite differences agree with
#: tapead's 1/(sqrt(z - 1) sqrt(z + 1))).  (eig is compared with JAX's eig with
#: its eigenvector derivatives turned on, which jnp.linalg.eig leaves off.)
COMPLEX_NO_JAX = {"erf_erfc", "arccosh_left_half"}

W4 = np.array([[0.7, -0.2, 1.1, 0.2], [0.4, 0.9, -0.6, 1.3], [-1.0, 0.3, 0.5, -0.4],
               [0.6, -0.8, 0.1, 0.9]])
W3 = W4[:3, :3]


def _sps(m):
    if m.__name__.startswith("jax"):
        import jax.scipy.special as sps
    else:
        import scipy.special as sps
    return sps


def _eigh_loss(m, z):
    """Phase-invariant functions of the eigenpairs of the Hermitian z + z^H."""
    w, V = m.linalg.eigh(z + m.conj(m.transpose(z)))
    return m.sum(m.abs(V) ** 2 * W3 * w[None, :], axis=0) + m.sin(w)


def _svd_loss(m, z):
    """Phase-invariant functions of the singular triplets: |U|^2 weighted by s,
    |Vh|^2, and U diag(s^2) Vh."""
    U, s, Vh = m.linalg.svd(z, full_matrices=False)
    k = s.shape[-1]
    return (m.sum(m.abs(U) ** 2 * W4[:U.shape[0], :k] * s[None, :], axis=0)
            + m.sum(m.abs(Vh) ** 2 * W4[:k, :1], axis=1)
            + m.abs(U @ m.diag(s ** 2) @ Vh).sum(axis=0)[:k])


def _eigvals_loss(m, w):
    """Functions of the eigenvalues that do not depend on their order."""
    return m.stack([m.sum(m.abs(w) ** 2), m.sum(m.real(w ** 3)), m.sum(m.imag(w) ** 2)])


def _eig(m, z):
    """np.linalg.eig, or JAX's eig with its eigenvector derivatives on."""
    if m.__name__.startswith("jax"):
        import jax
        return jax.lax.linalg.eig(z, compute_left_eigenvectors=False,
                                  enable_eigvec_derivs=True)
    return m.linalg.eig(z)


def _eig_loss(m, z):
    """Functions of each eigenpair invariant under V[:, i] -> e^(i t) V[:, i]."""
    w, V = _eig(m, z)
    return m.sum(m.abs(V) ** 2 * W3, axis=0) * m.abs(w) + m.real(w * w)
