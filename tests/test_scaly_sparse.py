"""Sparse derivatives in the graph API: seed 000's outputs, random patterns."""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead.coloring import (is_valid_acyclic_coloring, is_valid_column_coloring,
                             is_valid_star_coloring)


def seed_function():
    @sc.function(sc.L("x", 3), sc.L("y", ...))
    def f(x):
        return sc.stack([x[0] * x[2], x[1] ** 2, 2.0 * x[0] + x[2] ** 2])
    return f


def arrow_total(n):
    @sc.function(sc.G(sc.L("x", 1), sc.L("p", 1)), sc.L("c", ...))
    def stage(inputs):
        x, p = inputs
        return (x * p).sin().sum()

    @sc.function(sc.L("w", n + 1), sc.L("cost", ...))
    def total(w):
        return sc.vmap(stage, n, [w[:n], w[n:]]).sum()
    return total


# ---------------------------------------------------------------------------
# seed 000, "Finding the pattern" to "Star coloring for Hessians"
# ---------------------------------------------------------------------------

def test_seed_pattern_coloring_seeds_and_compact_values():
    f = seed_function()
    x = sc.sym("x", 3)
    pattern = sc.jacobian_sparsity(f(x), x)
    assert str(pattern.to_mask().astype(int)) == "[[1 0 1]\n [0 1 0]\n [1 0 1]]"
    colors = sc.column_coloring(pattern)
    assert colors == (0, 0, 1) and str(colors) == "(0, 0, 1)"
    assert str(sc.color_groups(colors)) == "((0, 1), (2,))"
    seeds = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    fwd = sc.forward(f, "y", "x")
    x_value = np.array([1.0, 2.0, 3.0])
    B = np.stack([fwd((x_value, s)) for s in seeds], axis=1)
    assert str(B) == "[[3. 1.]\n [4. 0.]\n [2. 6.]]"
    sparse_jac = sc.sparse_jacobian(f, "y", "x")
    assert str(sparse_jac(x_value)) == "[3. 1. 4. 2. 6.]"
    assert sparse_jac.name == "f_spjac_y_x" and sparse_jac.output_names == ["spjac_y_x"]
    assert sparse_jac.output_sparsities == [pattern]
    assert f.output_sparsities == [None]
    text = sc.render_expr_assembly(sparse_jac)       # the seeds are a constant, on one line
    assert "value=[[1., 1., 0.], [0., 0., 1.]]} : tensor<2x3xfloat64>" in text


def test_seed_arrow_hessian():
    hess = sc.sparse_hessian(arrow_total(4), "cost", "w")
    pattern = hess.output_sparsities[0]
    assert pattern is not None
    assert str(pattern.to_mask().astype(int)) == (
        "[[1 0 0 0 1]\n [0 1 0 0 1]\n [0 0 1 0 1]\n [0 0 0 1 1]\n [1 1 1 1 1]]")
    assert str(sc.column_coloring(pattern)) == "(0, 1, 2, 3, 4)"
    assert str(sc.star_coloring(pattern)) == "(0, 0, 0, 0, 1)"


@pytest.mark.parametrize("n", [4, 50])
def test_arrow_star_needs_two_directions_and_matches_dense(n):
    total = arrow_total(n)
    hess = sc.sparse_hessian(total, "cost", "w")
    P = hess.output_sparsities[0]
    assert max(sc.star_coloring(P)) + 1 == 2
    assert max(sc.column_coloring(P)) + 1 == n + 1
    w = np.linspace(-1.0, 2.0, n + 1)
    H = ta.hessian(lambda w: tnp.sum(tnp.sin(w[:-1] * w[-1])))(w)
    np.testing.assert_allclose(hess(w), H[P.row, P.col], rtol=1e-13, atol=1e-14)
    for coloring in ("column", "acyclic"):
        other = sc.sparse_hessian(total, "cost", "w", coloring=coloring)
        np.testing.assert_allclose(other(w), hess(w), rtol=1e-13, atol=1e-14)


# ---------------------------------------------------------------------------
# random sparse functions
# ---------------------------------------------------------------------------

UNARY = [lambda v: v.sin(), lambda v: v.exp(), lambda v: v * v, lambda v: (1.0 + v * v).log()]
TUNARY = [tnp.sin, tnp.exp, lambda v: v * v, lambda v: tnp.log(1.0 + v * v)]


def random_residual(seed, n=9, m=7):
    """y_i = u(x_a) * x_b + v(x_c) for random a, b, c: a random sparse Jacobian."""
    rng = np.random.default_rng(seed)
    terms = [(int(rng.integers(n)), int(rng.integers(n)), int(rng.integers(n)),
              int(rng.integers(4)), int(rng.integers(4))) for _ in range(m)]

    def body(x, unary, stackf):
        return stackf([unary[u](x[a]) * x[b] + unary[v](x[c]) for a, b, c, u, v in terms])

    @sc.function(sc.arg("x", n), outputs=sc.arg("y", m))
    def f(x):
        return body(x, UNARY, sc.stack)

    exact = np.zeros((m, n), bool)
    for i, (a, b, c, _, _) in enumerate(terms):
        exact[i, [a, b, c]] = True
    return f, (lambda x: body(x, TUNARY, tnp.stack)), exact


@pytest.mark.parametrize("seed", range(8))
def test_random_sparse_jacobians(seed):
    f, ref, exact = random_residual(seed)
    x = sc.sym("x", 9)
    P = sc.jacobian_sparsity(f(x), x)
    np.testing.assert_array_equal(P.to_mask(), exact)
    for order in ("natural", "largest_first", "smallest_last", "incidence_degree"):
        assert is_valid_column_coloring(P.to_scipy(), sc.column_coloring(P, order=order))
    sj = sc.sparse_jacobian(f, "y", "x")
    rng = np.random.default_rng(seed)
    for _ in range(2):
        xv = rng.normal(size=9)
        J = ta.jacfwd(ref)(xv)
        assert not np.any(J[~P.to_mask()])          # the pattern is a superset
        np.testing.assert_allclose(sj(xv), J[P.row, P.col], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(sj(xv), sc.jacobian(f, "y", "x")(xv)[P.row, P.col],
                                   rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_random_sparse_hessians(seed):
    f_res, ref_res, _ = random_residual(seed)

    @sc.function(sc.arg("x", 9), outputs=sc.arg("cost", ()))
    def f(x):
        return sc.sumsqr(f_res(x)) + x[0] * x[8]

    def ref(x):
        return tnp.sum(ref_res(x) ** 2) + x[0] * x[8]

    sh = sc.sparse_hessian(f, "cost", "x")
    P = sh.output_sparsities[0]
    assert (P.to_mask() == P.to_mask().T).all()
    assert is_valid_star_coloring(P.to_scipy(), sc.star_coloring(P))
    assert is_valid_acyclic_coloring(P.to_scipy(), sc.acyclic_coloring(P))
    xv = np.random.default_rng(seed).normal(size=9)
    H = ta.hessian(ref)(xv)
    assert not np.any(H[~P.to_mask()])
    np.testing.assert_allclose(sh(xv), H[P.row, P.col], rtol=1e-12, atol=1e-12)
    by_substitution = sc.sparse_hessian(f, "cost", "x", coloring="acyclic")
    assert by_substitution.output_sparsities[0] == P
    np.testing.assert_allclose(by_substitution(xv), H[P.row, P.col], rtol=1e-11,
                               atol=1e-11 * max(1.0, np.abs(H).max()))


def test_pattern_follows_calls_and_ignores_other_inputs():
    @sc.function(sc.arg("u", 2))
    def g(u):
        return u[0] * u[1]

    @sc.function(sc.arg("x", 4), sc.arg("k", ()))
    def f(x, k):
        return sc.stack([g(x[:2]) * k, g(x[2:]), k * 3.0])

    x, k = f.input("x"), f.input("k")
    P = sc.jacobian_sparsity(f.outputs[0], x)
    np.testing.assert_array_equal(P.to_mask().astype(int),
                                  [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(sc.jacobian_sparsity(f.outputs[0], k).to_mask().ravel(),
                                  [True, False, True])
    sj = sc.sparse_jacobian(f, "out", "x")
    np.testing.assert_allclose(sj(np.array([1.0, 2.0, 3.0, 4.0]), np.array(5.0)),
                               [10.0, 5.0, 4.0, 3.0])


def test_no_dependence_gives_an_empty_pattern():
    @sc.function(sc.arg("x", 3), sc.arg("a", 2))
    def f(x, a):
        return a * 2.0
    P = sc.jacobian_sparsity(f.outputs[0], f.input("x"))
    assert P.shape == (2, 3) and P.nnz == 0
    sj = sc.sparse_jacobian(f, "out", "x")
    assert sj(np.ones(3), np.ones(2)).shape == (0,)


def test_sparsity_object():
    P = sc.Sparsity([[1, 0], [1, 1]])
    assert P.shape == (2, 2) and P.nnz == 3 and repr(P) == "Sparsity(2x2, nnz=3)"
    np.testing.assert_array_equal(P.row, [0, 1, 1])
    np.testing.assert_array_equal(P.col, [0, 0, 1])
    assert P == sc.Sparsity(np.array([[True, False], [True, True]]))
    assert P != sc.Sparsity([[1, 1], [1, 1]])
    with pytest.raises(ValueError, match="2-d"):
        sc.Sparsity(np.ones((2, 2, 2)))


def test_errors():
    f = seed_function()
    with pytest.raises(TypeError, match="sc.sym"):
        sc.jacobian_sparsity(f.outputs[0], np.ones(3))
    with pytest.raises(sc.LayoutError, match="input symbol"):
        sc.jacobian_sparsity(f.outputs[0], f.outputs[0])
    with pytest.raises(sc.NonScalarGradientError, match="single element"):
        sc.sparse_hessian(f, "y", "x")
    with pytest.raises(ValueError, match="'star'.*'acyclic'.*'column'"):
        sc.sparse_hessian(arrow_total(3), "cost", "w", coloring="distance1")
    with pytest.raises(sc.UnknownNameError):
        sc.sparse_jacobian(f, "z", "x")
    with pytest.raises(ValueError, match="order"):
        sc.column_coloring(sc.Sparsity(np.eye(3)), order="random")


def test_dense_hessian_of_a_banded_function_takes_few_directions():
    # sc.hessian colors the gradient's pattern: a tridiagonal Hessian needs 3
    # forward passes, not one per input, and the values are the dense ones
    n = 40

    @sc.function(sc.arg("x", n))
    def rosen(x):
        c = 0.0
        for i in range(n - 1):
            c = c + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
        return c

    H = sc.hessian(rosen, "out", "x")
    x = np.linspace(-1.0, 1.2, n)
    ref = ta.hessian(lambda x: tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2
                                       + (1.0 - x[:-1]) ** 2))(x)
    np.testing.assert_allclose(H(x), ref, rtol=1e-14, atol=1e-12)
    np.testing.assert_allclose(H(x + 0.3), ta.hessian(lambda x: tnp.sum(
        100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2))(x + 0.3),
        rtol=1e-14, atol=1e-12)
    g = sc.gradient(rosen, "out", "x")
    P = sc.jacobian_sparsity(g.outputs[0], rosen.input("x"))
    assert max(sc.column_coloring(P)) + 1 == 3
    # a tridiagonal Hessian: acyclic coloring takes 2 colors where star takes 3,
    # and every off-diagonal value is solved by substitution along one path
    assert max(sc.acyclic_coloring(P)) + 1 == 2 and max(sc.star_coloring(P)) + 1 == 3
    by_substitution = sc.sparse_hessian(rosen, "out", "x", coloring="acyclic")
    np.testing.assert_allclose(by_substitution(x), ref[P.row, P.col], rtol=1e-12,
                               atol=1e-9)
