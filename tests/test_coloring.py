"""Tests for tapead.coloring: seed examples, properties, recovery, errors."""
import doctest
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from tapead.coloring import greedy as tg
from tapead.coloring._pattern import _Pattern
from tapead.coloring import (
    ORDERS,
    acyclic_coloring,
    acyclic_recovery,
    color_groups,
    column_coloring,
    is_valid_acyclic_coloring,
    is_valid_column_coloring,
    is_valid_star_coloring,
    jacobian_recovery,
    star_coloring,
    star_recovery,
)

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "coloring.md"
SEED3 = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=bool)


def arrow(n_stages):
    """Diagonal plus a dense last row and column, shape (N + 1, N + 1)."""
    n = n_stages + 1
    i = np.arange(n_stages)
    rows = np.concatenate([np.arange(n), i, np.full(n_stages, n_stages)])
    cols = np.concatenate([np.arange(n), np.full(n_stages, n_stages), i])
    return sp.csr_array((np.ones(len(rows), bool), (rows, cols)), shape=(n, n))


def tridiagonal(n):
    return sp.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)],
                          offsets=[-1, 0, 1], format="csr").astype(bool)


def stencil5(k):
    """Pattern of the 2-D 5-point Laplacian on a k x k grid."""
    t = tridiagonal(k)
    eye = sp.eye_array(k, dtype=bool, format="csr")
    return (sp.kron(eye, t) + sp.kron(t, eye)).astype(bool).tocsr()


def random_values(pattern, rng, symmetric=False):
    """Dense matrix with random values on the pattern (symmetric if asked)."""
    mask = pattern.toarray() if sp.issparse(pattern) else np.asarray(pattern)
    mask = mask != 0
    values = np.where(mask, rng.uniform(0.5, 2.0, mask.shape), 0.0)
    if symmetric:
        values = np.triu(values) + np.triu(values, 1).T
    return values


def symmetric_masks(max_n=14):
    def build(args):
        n, bits, diag = args
        m = bits[:n, :n] | bits[:n, :n].T
        np.fill_diagonal(m, diag[:n])
        return m
    return st.integers(1, max_n).flatmap(lambda n: st.tuples(
        st.just(n),
        arrays(bool, (n, n), elements=st.booleans()),
        arrays(bool, (n,), elements=st.booleans()),
    )).map(build)


# ---------------------------------------------------------------------------
# The seed examples, exactly
# ---------------------------------------------------------------------------

def test_seed_column_coloring_and_groups():
    colors = column_coloring(SEED3)
    assert colors == (0, 0, 1)
    assert color_groups(colors) == ((0, 1), (2,))
    assert column_coloring(sp.csr_matrix(SEED3)) == (0, 0, 1)
    assert column_coloring(sp.coo_array(SEED3)) == (0, 0, 1)


def test_seed_jacobian_recovery_values():
    J = np.array([[3.0, 0, 1], [0, 4, 0], [2, 0, 6]])
    rec = jacobian_recovery(SEED3, (0, 0, 1))
    np.testing.assert_array_equal(rec.seed, [[1, 0], [1, 0], [0, 1]])
    B = J @ rec.seed
    np.testing.assert_array_equal(B, [[3, 1], [4, 0], [2, 6]])
    np.testing.assert_array_equal(rec.recover(B), [3.0, 1.0, 4.0, 2.0, 6.0])
    out = rec.to_sparse(rec.recover(B))
    assert isinstance(out, sp.csr_array)
    np.testing.assert_array_equal(out.toarray(), J)


def test_seed_arrow():
    pattern = arrow(4)
    assert column_coloring(pattern) == (0, 1, 2, 3, 4)
    assert star_coloring(pattern) == (0, 0, 0, 0, 1)
    assert acyclic_coloring(pattern) == (0, 0, 0, 0, 1)


@pytest.mark.parametrize("n_stages", [1, 2, 50, 1000])
def test_arrow_needs_two_star_colors(n_stages):
    pattern = arrow(n_stages)
    assert len(set(star_coloring(pattern))) == 2
    assert len(set(acyclic_coloring(pattern))) == 2


def test_color_counts_known_cases():
    assert max(column_coloring(tridiagonal(100))) + 1 == 3
    assert max(star_coloring(tridiagonal(100))) + 1 == 3
    assert max(acyclic_coloring(tridiagonal(100))) + 1 == 2
    colors = column_coloring(stencil5(100))
    # Greedy natural order; CasADi's coloring needs 7 for this pattern.
    assert max(colors) + 1 <= 7
    assert is_valid_column_coloring(stencil5(100), colors)


def test_empty_and_degenerate_patterns():
    assert column_coloring(np.zeros((0, 0), bool)) == ()
    assert column_coloring(np.zeros((3, 2), bool)) == (0, 0)
    assert star_coloring(np.eye(3, dtype=bool)) == (0, 0, 0)
    assert color_groups(()) == ()
    rec = acyclic_recovery(np.eye(3), (0, 0, 0))
    np.testing.assert_array_equal(rec.recover(np.diag([1.0, 2, 3]) @ rec.seed), [1, 2, 3])


# ---------------------------------------------------------------------------
# Properties on random patterns
# ---------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(mask=st.integers(1, 12).flatmap(lambda m: st.integers(1, 12).flatmap(
    lambda n: arrays(bool, (m, n), elements=st.booleans()))),
    order=st.sampled_from(ORDERS), seed=st.integers(0, 2**32 - 1))
def test_column_coloring_valid_and_recovers(mask, order, seed):
    pattern = sp.csr_array(mask)
    colors = column_coloring(pattern, order)
    assert is_valid_column_coloring(mask, colors)
    J = random_values(mask, np.random.default_rng(seed))
    rec = jacobian_recovery(pattern, colors)
    values = rec.recover(J @ rec.seed)
    np.testing.assert_allclose(rec.to_sparse(values).toarray(), J, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(values, sp.csr_array(J).data)
    np.testing.assert_array_equal(rec.recover_tangents((J @ rec.seed).T), values)


@settings(max_examples=150, deadline=None)
@given(mask=symmetric_masks(), order=st.sampled_from(ORDERS),
       seed=st.integers(0, 2**32 - 1))
def test_star_coloring_valid_and_recovers(mask, order, seed):
    colors = star_coloring(mask, order)
    assert is_valid_star_coloring(mask, colors)
    assert is_valid_acyclic_coloring(mask, colors)  # a star coloring is acyclic
    H = random_values(mask, np.random.default_rng(seed), symmetric=True)
    for build in (star_recovery, acyclic_recovery):
        rec = build(mask, colors)
        values = rec.recover(H @ rec.seed)
        np.testing.assert_allclose(rec.to_sparse(values).toarray(), H, rtol=0, atol=1e-12)
        # The forward sweep's layout (one row per direction) gives the same values.
        np.testing.assert_array_equal(rec.recover_tangents((H @ rec.seed).T), values)


@settings(max_examples=150, deadline=None)
@given(mask=symmetric_masks(), order=st.sampled_from(ORDERS),
       seed=st.integers(0, 2**32 - 1))
def test_acyclic_coloring_valid_and_recovers(mask, order, seed):
    colors = acyclic_coloring(mask, order)
    assert is_valid_acyclic_coloring(mask, colors)
    H = random_values(mask, np.random.default_rng(seed), symmetric=True)
    rec = acyclic_recovery(sp.csr_array(mask), colors)
    values = rec.recover(H @ rec.seed)
    np.testing.assert_allclose(rec.to_sparse(values).toarray(), H, rtol=0, atol=1e-12)
    # Reusing the recovery (its accumulator) gives the same answer again.
    np.testing.assert_array_equal(rec.recover(H @ rec.seed), values)


@settings(max_examples=150, deadline=None)
@given(mask=symmetric_masks(), seed=st.integers(0, 2**32 - 1))
def test_auto_order_valid_recovers_and_never_worse(mask, seed):
    """order="auto" keeps the fewest colors, and the result passes the checkers."""
    star = star_coloring(mask, "auto")
    acyclic = acyclic_coloring(mask, "auto")
    assert is_valid_star_coloring(mask, star)
    assert is_valid_acyclic_coloring(mask, acyclic)
    assert star == star_coloring(mask.copy(), "auto")          # deterministic
    for order in ORDERS:
        assert max(star, default=-1) <= max(star_coloring(mask, order), default=-1)
        assert max(acyclic, default=-1) <= max(acyclic_coloring(mask, order), default=-1)
    H = random_values(mask, np.random.default_rng(seed), symmetric=True)
    for build, colors in ((star_recovery, star), (acyclic_recovery, acyclic)):
        rec = build(mask, colors)
        np.testing.assert_allclose(rec.to_sparse(rec.recover(H @ rec.seed)).toarray(), H,
                                   rtol=0, atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(mask=st.integers(1, 12).flatmap(lambda m: st.integers(1, 12).flatmap(
    lambda n: arrays(bool, (m, n), elements=st.booleans()))))
def test_auto_column_coloring_valid_and_never_worse(mask):
    colors = column_coloring(mask, "auto")
    assert is_valid_column_coloring(mask, colors)
    for order in ORDERS:
        assert max(colors) <= max(column_coloring(mask, order))


@settings(max_examples=150, deadline=None)
@given(mask=symmetric_masks(), order=st.sampled_from(ORDERS))
def test_distance2_star_kernel_is_a_star_coloring(mask, order):
    """The GMP 2005 kernel that "auto" also tries, on its own, in every order."""
    pat = _Pattern(mask)
    ptr, adj, _ = pat.graph("star_coloring")
    perm = tg._order((ptr, adj), pat.shape[0], order, None)
    colors, ncolors = tg._coloring.star_coloring_d2_kernel(ptr, adj, perm)
    assert is_valid_star_coloring(mask, colors)
    assert ncolors == (colors.max() + 1 if len(colors) else 0)


def test_auto_order_cases():
    # Stops at the lower bound on the arrow (2) and tridiagonal (3 star, 2 acyclic).
    assert star_coloring(arrow(4), "auto") == (0, 0, 0, 0, 1)
    assert max(star_coloring(arrow(10**4), "auto")) + 1 == 2
    assert max(star_coloring(tridiagonal(100), "auto")) + 1 == 3
    assert max(acyclic_coloring(tridiagonal(100), "auto")) + 1 == 2
    assert max(star_coloring(stencil5(30), "auto")) + 1 <= 5
    assert column_coloring(SEED3, "auto") == (0, 0, 1)
    # A random symmetric pattern where the distance-2 star algorithm in
    # largest-first order wins (CasADi's default): 11 colors against 15.
    a = sp.random_array((1000, 1000), density=0.003, rng=np.random.default_rng(0),
                        format="csr").astype(bool)
    sym = (a + a.T + sp.eye_array(1000, dtype=bool)).astype(bool).tocsr()
    colors = star_coloring(sym, "auto")
    assert is_valid_star_coloring(sym, colors)
    assert max(colors) + 1 <= 11 < max(star_coloring(sym)) + 1
    acyclic = acyclic_coloring(sym, "auto")
    assert is_valid_acyclic_coloring(sym, acyclic) and max(acyclic) + 1 <= 7


@settings(max_examples=60, deadline=None)
@given(mask=symmetric_masks(10), order=st.sampled_from(ORDERS))
def test_orders_are_permutations_and_deterministic(mask, order):
    assert star_coloring(mask, order) == star_coloring(mask.copy(), order)
    assert column_coloring(mask, order) == column_coloring(sp.csc_array(mask), order)


# ---------------------------------------------------------------------------
# The checkers themselves reject wrong colorings
# ---------------------------------------------------------------------------

def test_checkers_reject_bad_colorings():
    assert not is_valid_column_coloring(SEED3, (0, 1, 0))
    path4 = tridiagonal(4)
    assert is_valid_acyclic_coloring(path4, (0, 1, 0, 1))
    assert not is_valid_star_coloring(path4, (0, 1, 0, 1))  # 2-colored P4
    assert is_valid_star_coloring(path4, (0, 1, 0, 2))
    cycle4 = tridiagonal(4).toarray()
    cycle4[0, 3] = cycle4[3, 0] = True
    assert not is_valid_acyclic_coloring(cycle4, (0, 1, 0, 1))
    assert not is_valid_star_coloring(path4, (0, 0, 1, 2))  # not proper


def test_recovery_rejects_wrong_colorings():
    with pytest.raises(ValueError, match="column_coloring"):
        jacobian_recovery(SEED3, (0, 1, 0))
    path4 = tridiagonal(4)
    with pytest.raises(ValueError, match="star_coloring"):
        star_recovery(path4, (0, 1, 0, 1))
    cycle4 = path4.toarray()
    cycle4[0, 3] = cycle4[3, 0] = True
    with pytest.raises(ValueError, match="acyclic_coloring"):
        acyclic_recovery(cycle4, (0, 1, 0, 1))


# ---------------------------------------------------------------------------
# Error paths say what to do
# ---------------------------------------------------------------------------

def test_non_square_pattern_to_star_coloring():
    with pytest.raises(ValueError, match="square symmetric.*column_coloring"):
        star_coloring(np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="square"):
        acyclic_coloring(np.ones((2, 3), bool))


def test_unsymmetric_pattern_to_star_coloring():
    with pytest.raises(ValueError, match=r"P \+ P.T"):
        star_coloring(np.triu(np.ones((3, 3), bool)))


def test_wrong_b_shape():
    rec = jacobian_recovery(SEED3, (0, 0, 1))
    with pytest.raises(ValueError, match=r"shape \(3, 2\).*seed"):
        rec.recover(np.ones((3, 3)))
    srec = star_recovery(arrow(4), star_coloring(arrow(4)))
    with pytest.raises(ValueError, match=r"H @ S"):
        srec.recover(np.ones((4, 2)))
    arec = acyclic_recovery(arrow(4), acyclic_coloring(arrow(4)))
    with pytest.raises(ValueError, match=r"shape \(5, 2\)"):
        arec.recover(np.ones(10))
    with pytest.raises(ValueError, match="recover"):
        rec.to_sparse(np.ones(4))
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*B.T"):
        rec.recover_tangents(np.ones((3, 2)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="largest_first.*auto"):
        column_coloring(SEED3, order="random")
    with pytest.raises(ValueError, match="2-D"):
        column_coloring(np.ones(3))
    with pytest.raises(ValueError, match="one color per column"):
        jacobian_recovery(SEED3, (0, 1))


# ---------------------------------------------------------------------------
# Scale: the natural-order path stays linear
# ---------------------------------------------------------------------------

def test_large_banded_is_fast():
    import time
    pattern = tridiagonal(10**6)
    start = time.perf_counter()
    colors = column_coloring(pattern)
    elapsed = time.perf_counter() - start
    assert max(colors) + 1 == 3
    assert elapsed < 1.0, elapsed


def test_docs_examples_run():
    result = doctest.testfile(str(DOCS), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
