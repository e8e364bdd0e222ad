"""Op-spec rows of the contractions and linear algebra.

Domains keep every point well-conditioned: square matrices are drawn as
``U + n I`` with ``U`` uniform on (-1, 1) (``WellConditioned``), so inverses,
solves and determinants stay far from singular in float32 too.  Functions
that need a structured input build it *inside* the body from the free
random input, so finite differences stay on the manifold: symmetric
positive definite ``x x^T + 3 I`` for cholesky, symmetric ``x + x^T`` plus a
fixed diagonal spread (distinct eigenvalues) for eigh.  Eigenvectors and the
factors of QR are defined up to sign, so the eigh/qr rows return
sign-invariant functions of them (``V * V``, ``V sin(w) V^T``, ``Q * Q``).
The SVD rows build ``x / 4 + D`` (``_spread_rect``: well-separated nonzero
singular values) and return ``s``, ``U sin(S) Vh`` or ``U * U`` / ``Vh * Vh``
(invariant to the joint sign flips of singular vector pairs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opspecs import REAL
from opspecs import _array_op as A


@dataclass(frozen=True)
class WellConditioned:
    """(Stacks of) square matrices ``U + shift I``, U uniform on (-1, 1)."""
    shift: float

    def sample(self, rng, shape):
        return rng.uniform(-1.0, 1.0, shape) + self.shift * np.eye(shape[-1])


WC = WellConditioned(3.0)


def _const(x, v):
    """A constant array in ``x``'s dtype (float32 stays float32)."""
    return np.asarray(v, dtype=x.dtype)


def _spd(m, x):
    """Symmetric positive definite: x x^T + 3 I."""
    return m.matmul(x, m.swapaxes(x, -1, -2)) + _const(x, 3.0 * np.eye(x.shape[-2]))


def _sym_spread(m, x):
    """Symmetric with well-separated eigenvalues: (x + x^T) / 4 + diag(0, 2, 4, ...)."""
    n = x.shape[-1]
    return 0.25 * (x + m.swapaxes(x, -1, -2)) + _const(x, np.diag(2.0 * np.arange(n)))


def _eigh_fn(m, x):
    """V sin(W) V^T: a matrix function, invariant to the eigenvectors' signs."""
    w, v = m.linalg.eigh(_sym_spread(m, x))
    return m.matmul(v * m.sin(w)[..., None, :], m.swapaxes(v, -1, -2))


def _slogdet_neg(m, x):
    """sign * log|det| of a matrix with negative determinant (rows flipped)."""
    sign, logdet = m.linalg.slogdet(x[::-1])
    return sign * logdet


def _spread_rect(m, x):
    """(Stacks of) m x n matrices with well-separated, nonzero singular values:
    x / 4 + D, D with 1.5 * (k, k - 1, ..., 1) on its diagonal (k = min(m, n))."""
    r, c = x.shape[-2:]
    k = min(r, c)
    d = np.zeros((r, c))
    d[range(k), range(k)] = 1.5 * np.arange(k, 0, -1)
    return 0.25 * x + _const(x, d)


def _svd_fn(m, x):
    """U sin(S) Vh: invariant to the joint sign flips of U's columns and Vh's rows."""
    u, s, vh = m.linalg.svd(_spread_rect(m, x), full_matrices=False)
    return m.matmul(u * m.sin(s)[..., None, :], vh)


def _svd_vectors(m, x):
    """U ** 2 and Vh ** 2 (sign-invariant), weighted and side by side."""
    u, s, vh = m.linalg.svd(_spread_rect(m, x), full_matrices=False)
    k = s.shape[-1]
    return m.concatenate([m.reshape(u ** 2 * _const(x, WEIGHTS[:u.shape[-2], :k]),
                                    u.shape[:-2] + (-1,)),
                          m.reshape(vh ** 2 * _const(x, WEIGHTS.T[:k, :vh.shape[-1]] + 0.5),
                                    vh.shape[:-2] + (-1,))], axis=-1)


# generic weights: the columns of V are unit vectors, so sum(V ** 2) is constant
WEIGHTS = np.array([[1.0, 2.0, -1.5, 0.7], [0.5, -1.0, 2.0, -0.3], [3.0, 1.0, -2.0, 1.2],
                    [-0.8, 0.4, 1.1, 2.5]])

SQ = ("square", ((3, 3),))
BATCH = ("batched", ((2, 3, 3),))
RECT = (SQ, ("tall", ((4, 3),)), ("wide", ((3, 4),)))

ARRAY_OPS = [
    # contractions ---------------------------------------------------------------
    A("inner", lambda m, a, b: m.inner(a, b),
      ("vv", ((3,), (3,))), ("mv", ((2, 3), (3,))), ("mm", ((2, 3), (4, 3)))),
    A("tensordot_int1", lambda m, a, b: m.tensordot(a, b, axes=1),
      ("mm", ((2, 3), (3, 4))), ("3d", ((2, 2, 3), (3, 2)))),
    A("tensordot_int2", lambda m, a, b: m.tensordot(a, b, axes=2),
      ("3d", ((2, 3, 2), (3, 2, 2)))),
    A("tensordot_pair", lambda m, a, b: m.tensordot(a, b, axes=([0, 2], [2, 0])),
      ("3d", ((3, 2, 2), (2, 2, 3)))),
    A("dot_nd", lambda m, a, b: m.dot(a, b),
      ("3d_2d", ((2, 2, 3), (3, 2))), ("3d_1d", ((2, 2, 3), (3,))),
      ("2d_3d", ((2, 3), (2, 3, 2)))),
    A("kron", lambda m, a, b: m.kron(a, b),
      ("mm", ((2, 3), (2, 2))), ("vv", ((3,), (2,))), ("mv", ((2, 2), (3,)))),
    A("einsum_matmul", lambda m, a, b: m.einsum("ij,jk->ik", a, b), ("mm", ((2, 3), (3, 2)))),
    A("einsum_implicit", lambda m, a, b: m.einsum("ij,jk", a, b), ("mm", ((2, 3), (3, 2)))),
    A("einsum_trace", lambda m, x: m.einsum("ii->", x), ("square", ((3, 3),))),
    A("einsum_diag", lambda m, x: m.einsum("ii->i", x), ("square", ((3, 3),))),
    A("einsum_transpose", lambda m, x: m.einsum("ijk->kji", x), ("3d", ((2, 3, 2),))),
    A("einsum_batch", lambda m, a, b: m.einsum("bij,bjk->bik", a, b),
      ("batched", ((2, 2, 3), (2, 3, 2)))),
    A("einsum_ellipsis", lambda m, a, b: m.einsum("...ij,...jk", a, b),
      ("batched", ((2, 2, 3), (2, 3, 2))), ("bcast", ((2, 2, 3), (3, 2))),
      ("bcast_size1", ((2, 1, 2, 3), (3, 3, 2)))),
    A("einsum_bcast_label", lambda m, a, b: m.einsum("ij,ij->ij", a, b),
      ("size1", ((1, 3), (2, 3)))),
    A("einsum_sum_out", lambda m, a, b: m.einsum("ij,jk->j", a, b), ("mm", ((2, 3), (3, 2)))),
    A("einsum_three_optimize",
      lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c, optimize=True),
      ("chain", ((2, 3), (3, 3), (3, 2)))),
    A("einsum_diag_weighted", lambda m, x, v: m.einsum("iij,j->i", x, v),
      ("3d", ((3, 3, 2), (2,)))),
    # linear algebra --------------------------------------------------------------
    A("solve", lambda m, a, b: m.linalg.solve(a, b),
      ("vector", ((3, 3), (3,))), ("matrix", ((3, 3), (3, 2))),
      ("batched", ((2, 3, 3), (2, 3, 2))), ("batched_vector", ((2, 3, 3), (3,))),
      domain=(WC, REAL)),
    A("inv", lambda m, x: m.linalg.inv(x), SQ, BATCH, domain=(WC,)),
    A("det", lambda m, x: m.linalg.det(x), SQ, BATCH, domain=(WC,)),
    A("slogdet", lambda m, x: m.linalg.slogdet(x)[1], SQ, BATCH, domain=(WC,)),
    A("slogdet_negative", _slogdet_neg, SQ, domain=(WC,)),
    A("cholesky", lambda m, x: m.linalg.cholesky(_spd(m, x)),
      ("square", ((3, 3),)), ("wide", ((3, 4),)), ("batched", ((2, 3, 3),))),
    A("eigh_values", lambda m, x: m.linalg.eigh(_sym_spread(m, x))[0], SQ, BATCH),
    A("eigh_vectors_squared", lambda m, x: m.linalg.eigh(_sym_spread(m, x))[1] ** 2
      * _const(x, WEIGHTS[:3, :3]), SQ),
    A("eigh_function", _eigh_fn, SQ, BATCH),
    A("eigvalsh", lambda m, x: m.linalg.eigvalsh(_sym_spread(m, x)), SQ),
    A("svd_values", lambda m, x: m.linalg.svd(_spread_rect(m, x), compute_uv=False),
      *RECT, BATCH),
    A("svdvals", lambda m, x: m.linalg.svdvals(_spread_rect(m, x)), ("tall", ((4, 3),))),
    A("svd_s", lambda m, x: m.linalg.svd(_spread_rect(m, x), full_matrices=False)[1],
      *RECT, ("batched", ((2, 4, 3),))),
    A("svd_function", _svd_fn, *RECT, ("batched", ((2, 3, 4),))),
    A("svd_vectors_squared", _svd_vectors, *RECT),
    A("qr_q", lambda m, x: m.linalg.qr(x)[0] ** 2,
      ("tall", ((4, 3),)), ("square", ((3, 3),)), ("batched", ((2, 4, 3),))),
    A("qr_r", lambda m, x: m.linalg.qr(x)[1] ** 2,
      ("tall", ((4, 3),)), ("square", ((3, 3),)), ("batched", ((2, 4, 3),))),
    A("pinv", lambda m, x: m.linalg.pinv(x),
      ("tall", ((4, 3),)), ("wide", ((2, 4),)), ("batched", ((2, 4, 3),))),
    A("lstsq", lambda m, a, b: m.linalg.lstsq(a, b)[0],
      ("vector", ((4, 3), (4,))), ("matrix", ((4, 3), (4, 2)))),
    A("linalg_trace", lambda m, x: m.linalg.trace(x), SQ, BATCH),
    A("linalg_diagonal", lambda m, x: m.linalg.diagonal(x), SQ, BATCH),
    A("matrix_transpose", lambda m, x: m.linalg.matrix_transpose(x), BATCH),
]
