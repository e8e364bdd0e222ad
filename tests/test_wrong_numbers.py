"""Regression tests for derivatives that once came out silently wrong, each at
the input that showed it, against central finite differences of numpy's own
function."""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta


def fd_jacobian(f, A, h=1e-6):
    """d f / d A[i, j] for every entry, by central differences (no symmetry)."""
    out = np.asarray(f(A))
    J = np.zeros(out.shape + A.shape)
    for idx in np.ndindex(A.shape):
        E = np.zeros_like(A)
        E[idx] = h
        J[(...,) + idx] = (np.asarray(f(A + E)) - np.asarray(f(A - E))) / (2 * h)
    return J


A6 = np.random.RandomState(0).randn(6, 6)


@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh_reads_one_triangle(UPLO):
    """numpy's eigh reads one triangle, so the derivative is with respect to that
    triangle and zero for the other (it used to symmetrize: d w / d A[0, 1] was
    [-0.0671, -0.2497, 0.1117, ...] where the truth is 0, and d w / d A[1, 0] half
    the truth)."""
    f = lambda A: np.linalg.eigh(A, UPLO).eigenvalues  # noqa: E731
    want = fd_jacobian(f, A6)
    for J in (ta.jacrev(f)(A6), ta.jacfwd(f)(A6)):
        np.testing.assert_allclose(J, want, atol=1e-7)
    unread = (0, 1) if UPLO == "L" else (1, 0)
    assert np.all(ta.jacrev(f)(A6)[(slice(None),) + unread] == 0.0)
    g = lambda A: np.linalg.eigvalsh(A, UPLO)  # noqa: E731
    np.testing.assert_allclose(ta.jacrev(g)(A6), want, atol=1e-7)
    # eigenvectors through a sign-invariant function, second order included
    h = lambda A: np.sum(np.linalg.eigh(A, UPLO).eigenvectors ** 2  # noqa: E731
                         * np.linspace(0.5, 1.5, 6))
    ta.check_grads(h, (A6,), order=2)


def test_eigh_at_a_symmetric_matrix_along_one_entry():
    """Even at a symmetric S, the upper entry alone does not move the value."""
    S = A6 + A6.T
    g = ta.grad(lambda S: np.linalg.eigh(S)[0][0])(S)
    assert g[0, 1] == 0.0
    assert g[1, 0] == pytest.approx(float(fd_jacobian(lambda S: np.linalg.eigh(S)[0][0],
                                                      S)[1, 0]), abs=1e-7)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_one_triangle(upper):
    R = np.random.RandomState(1).randn(4, 4)
    A = R @ R.T + 4 * np.eye(4)
    A[0, 2] += 0.7                       # make the input non-symmetric
    w = np.arange(16.0).reshape(4, 4)
    f = lambda A: np.sum(np.linalg.cholesky(A, upper=upper) * w)  # noqa: E731
    np.testing.assert_allclose(ta.grad(f)(A), fd_jacobian(f, A), atol=1e-7)
    F = lambda A: np.linalg.cholesky(A, upper=upper)  # noqa: E731
    np.testing.assert_allclose(ta.jacfwd(F)(A), fd_jacobian(F, A), atol=1e-7)
    # the traced value is numpy's value (upper=True reads the upper triangle)
    out = ta.jvp(F, (A,), (np.zeros((4, 4)),))[0]
    np.testing.assert_array_equal(out, np.linalg.cholesky(A, upper=upper))
    ta.check_grads(f, (A,), order=2)


@pytest.mark.parametrize("x, axis", [
    (0.7, None),
    (np.array(0.7), None),
    (np.array([[1.0, 2.0, 4.0]]), 0),
    (np.array([[1.0], [3.0]]), 1),
])
def test_std_of_one_element_is_flat(x, axis):
    """std over one element is identically 0: every derivative is 0 (was nan)."""
    f = lambda x: np.sum(np.std(x, axis=axis))  # noqa: E731
    g = ta.grad(f)(x)
    assert np.all(np.asarray(g) == 0.0)
    t = ta.jvp(f, (x,), (np.ones_like(x),))[1]
    assert float(t) == 0.0
    assert np.all(np.asarray(ta.hessian(f)(np.asarray(x, float))) == 0.0)


def test_std_conventions_elsewhere():
    # several elements, not constant: finite and right
    x = np.array([1.0, 2.0, 4.0])
    g = ta.grad(np.std)(x)
    np.testing.assert_allclose(g, (x - x.mean()) / (x.size * np.std(x)), rtol=1e-13)
    # a constant slice of several elements: nan (sqrt at 0), as in JAX
    with np.errstate(all="ignore"):
        assert np.isnan(ta.grad(np.std)(np.ones(3))).all()


def test_no_advice_that_drops_an_imaginary_part():
    """Refusing a complex input must not advise x.astype(float), which would
    silently drop the imaginary part."""
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j])
    for call in (lambda: ta.grad(lambda x: np.sum(np.abs(x)))(z),
                 lambda: ta.jacobian_sparsity(lambda x: np.abs(x), z),
                 lambda: ta.sparse_jacobian(lambda x: np.abs(x))(z)):
        with pytest.raises((TypeError, ValueError)) as info:
            call()
        assert "astype(float)" not in str(info.value)
