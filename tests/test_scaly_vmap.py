"""Mapped derivatives: derivatives of ``sc.vmap`` stay mapped (tapead.scaly.mapped).

Checked here: the outer functions of seed 000's "Mapped derivatives" listings
character for character, values against JAX (to ~1e-12) and against central
finite differences (first and second order), stage derivative Functions
built once per callee and request, graphs whose node count does not grow
with the number of stages, and evaluation of long mapped calls in C.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead.scaly import mapped as _mapped
from tapead.scaly import stage_derivatives as _stages
from tapead.scaly.calls import expand_calls
from tapead.scaly.graphs import topo_order

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:                                  # pragma: no cover
    jax = None


# ---------------------------------------------------------------------------
# the programs of seed 000
# ---------------------------------------------------------------------------

@sc.function(sc.G(sc.L("zz", 2), sc.L("p", 1)), sc.L("c", ...))
def link(inputs):
    zz, p = inputs
    return p[0] * (zz[1] - zz[0].sin()) ** 2


def chain_for(n):
    @sc.function(sc.G(sc.L("z", n + 1), sc.L("p", 1)), sc.L("cost", ...))
    def chain(inputs):
        z, p = inputs
        return sc.vmap(link, n, [(z, 0, 1), p]).sum()
    return chain


def chain_ref(z, p, np_=tnp):
    return p[0] * np_.sum((z[1:] - np_.sin(z[:-1])) ** 2)


def arrow_for(n):
    @sc.function(sc.G(sc.L("x", 1), sc.L("p", 1)), sc.L("c", ...))
    def stage(inputs):
        x, p = inputs
        return (x * p).sin().sum()

    @sc.function(sc.L("w", n + 1), sc.L("cost", ...))
    def total(w):
        return sc.vmap(stage, n, [w[:n], w[n:]]).sum()
    return total


def arrow_ref(w, np_=tnp):
    return np_.sum(np_.sin(w[:-1] * w[-1]))


@sc.function(sc.L("z", 2), sc.L("residual", ...))
def pair_stage(z):
    return sc.stack([z[0] * z[1], z[0].sin() + z[1] ** 2])


def stages_for(n):
    @sc.function(sc.L("zs", 2 * n), sc.L("residuals", ...))
    def stages(zs):
        return sc.vmap(pair_stage, n, [zs])
    return stages


def stages_ref(zs, np_=tnp):
    z0, z1 = zs[0::2], zs[1::2]
    return np_.stack([z0 * z1, np_.sin(z0) + z1 ** 2], axis=1).reshape(-1)


SEED_GRAD_Z = """\
  expr.func @chain_grad_cost_z(%z: tensor<5xfloat64 diff>, %p: tensor<1xfloat64 diff>) -> (%grad_cost_z: tensor<5xfloat64 diff>) {
    %0 = expr.input {lowering="auto", name="z"} : tensor<5xfloat64 diff>
    %1 = expr.input {lowering="auto", name="p"} : tensor<1xfloat64 diff>
    %2 = expr.const {lowering="auto", value=1.} : tensor<float64>
    %3 = expr.const {lowering="auto", value=[1., 1., 1., 1.]} : tensor<4xfloat64>
    %4 = expr.mul(%2, %3) : tensor<4xfloat64>
    %5 = expr.vmap(%0, %1, %4) {callee="link_adj0_0", length=4, output=0, slice_size=2, starts=[0, 0, 0], strides=[1, 0, 1]} : tensor<8xfloat64 diff>
    %6 = expr.gather(%5) {indices=[0, 1, 4, 5]} : tensor<4xfloat64 diff>
    %7 = expr.scatter(%6) {indices=[0, 1, 2, 3]} : tensor<5xfloat64 diff>
    %8 = expr.gather(%5) {indices=[2, 3, 6, 7]} : tensor<4xfloat64 diff>
    %9 = expr.scatter(%8) {indices=[1, 2, 3, 4]} : tensor<5xfloat64 diff>
    %10 = expr.add(%7, %9) : tensor<5xfloat64 diff>
    expr.return %10
  }"""

SEED_GRAD_P = """\
  expr.func @chain_grad_cost_p(%z: tensor<5xfloat64 diff>, %p: tensor<1xfloat64 diff>) -> (%grad_cost_p: tensor<1xfloat64 diff>) {
    %0 = expr.const {lowering="auto", value=[1., 1., 1., 1.]} : tensor<4xfloat64>
    %1 = expr.input {lowering="auto", name="z"} : tensor<5xfloat64 diff>
    %2 = expr.const {lowering="auto", value=1.} : tensor<float64>
    %3 = expr.mul(%2, %0) : tensor<4xfloat64>
    %4 = expr.vmap(%1, %3) {callee="link_adj0_1", length=4, output=0, slice_size=1, starts=[0, 0], strides=[1, 1]} : tensor<4xfloat64 diff>
    %5 = expr.gather(%4) {indices=[0, 1, 2, 3]} : tensor<4xfloat64 diff>
    %6 = expr.reshape(%5) {shape=[4, 1]} : tensor<4x1xfloat64 diff>
    %7 = expr.matmul(%0, %6) : tensor<1xfloat64 diff>
    expr.return %7
  }"""

SEED_SPJAC = re.compile(re.escape("""\
  expr.func @stages_spjac_residuals_zs(%zs: tensor<8xfloat64 diff>) -> (%spjac_residuals_zs: tensor<16xfloat64 diff>) {
    %0 = expr.input {lowering="auto", name="zs"} : tensor<8xfloat64 diff>
    %1 = expr.vmap(%0) {callee="pair_stage_fwd2c""") + "[0-9a-f]{10}" + re.escape(
    """_residual_z", length=4, output=0, slice_size=4, starts=[0], strides=[2]} : tensor<16xfloat64 diff>
    %2 = expr.gather(%1) {indices=[ 0,  2,  1, ..., 14, 13, 15]} : tensor<16xfloat64 diff>
    expr.return %2
  }""") + "$")


def outer(fn) -> str:
    """The first ``expr.func`` block of ``fn``'s listing (the stage Functions follow)."""
    lines = sc.render_expr_assembly(fn).splitlines()
    end = lines.index("  }")
    return "\n".join(lines[1:end + 1])


def nodes(fn) -> int:
    return len(topo_order(fn.outputs))


def ops(fn):
    return [n.op for n in topo_order(fn.outputs)]


Z = np.array([0.1, -0.4, 0.8, 1.3, 0.2])
P = np.array([1.7])


def central(f, x, h=1e-6):
    """Central differences of ``f`` (array out) at ``x``: shape f.shape + x.shape."""
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(cols, axis=-1)


# ---------------------------------------------------------------------------
# reverse mode: seed 000's listings, values
# ---------------------------------------------------------------------------

def test_seed_gradient_listings_character_for_character():
    chain = chain_for(4)
    assert outer(sc.gradient(chain, "cost", "z")) == SEED_GRAD_Z
    assert outer(sc.gradient(chain, "cost", "p")) == SEED_GRAD_P
    text = sc.render_expr_assembly(sc.gradient(chain, "cost", "z"))
    assert "expr.func @link_adj0_0(%zz: tensor<2xfloat64 diff>, %p: tensor<1xfloat64 diff>, " \
           "%adj_c: tensor<float64 diff>) -> (%adj_zz: tensor<2xfloat64 diff>)" in text


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_mapped_gradients_match_jax_and_finite_differences(n):
    chain = chain_for(n)
    rng = np.random.default_rng(n)
    z, p = rng.normal(size=n + 1), np.array([1.3])
    gz = sc.gradient(chain, "cost", "z")((z, p))
    gp = sc.gradient(chain, "cost", "p")((z, p))
    np.testing.assert_allclose(gz, ta.grad(chain_ref, argnums=0)(z, p), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gp, ta.grad(chain_ref, argnums=1)(z, p), rtol=1e-13)
    np.testing.assert_allclose(gz, central(lambda z: chain((z, p)), z), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gp, central(lambda p: chain((z, p)), p), rtol=1e-7)
    if jax is not None:
        jz, jp = jax.grad(lambda z, p: chain_ref(z, p, jnp), argnums=(0, 1))(z, p)
        np.testing.assert_allclose(gz, jz, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gp, jp, rtol=1e-12)


def test_broadcast_and_window_spellings_give_the_same_graph():
    @sc.function(sc.G(sc.L("z", 5), sc.L("p", 1)), sc.L("cost", ...))
    def spelled(inputs):
        z, p = inputs
        return sc.vmap(link, 4, [sc.window(z, 0, 1), sc.broadcast(p)]).sum()
    chain = chain_for(4)
    assert spelled.outputs[0] is chain.outputs[0]
    node = next(n for n in topo_order(chain.outputs) if n.op == "vmap")
    assert (node.attrs["callee"], node.attrs["length"], node.attrs["output"],
            node.attrs["slice_size"], node.attrs["starts"], node.attrs["strides"]) == \
        ("link", 4, 0, 1, (0, 0), (1, 0))


def test_slices_gradient_is_one_group_and_the_hessian_is_mapped():
    total = arrow_for(6)
    g = sc.gradient(total, "cost", "w")
    assert ops(g).count("vmap") == 2 and ops(g).count("sin") == 0
    w = np.linspace(-1.0, 2.0, 7)
    np.testing.assert_allclose(g(w), ta.grad(arrow_ref)(w), rtol=1e-14)
    H = sc.hessian(total, "cost", "w")
    np.testing.assert_allclose(H(w), ta.hessian(arrow_ref)(w), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(H(w), central(g, w), rtol=1e-6, atol=1e-8)


def test_stage_with_two_outputs_and_a_nested_mapped_call():
    @sc.function(sc.arg("u", 2), outputs=sc.group(sc.arg("a", 2), sc.arg("b", ())))
    def two(u):
        return u * u[1], (u[0] * u[1]).sin()

    @sc.function(sc.arg("v", 6), outputs=sc.arg("inner", ()))
    def nested(v):
        a, b = sc.vmap(two, 3, [v])
        return (a * a).sum() + b.sum()

    @sc.function(sc.arg("x", 12), outputs=sc.arg("y", ()))
    def top(x):
        return (sc.vmap(nested, 2, [x]) ** 2).sum()

    def ref(x):
        total = 0.0
        for h in range(2):
            v = x[6 * h:6 * h + 6]
            inner = 0.0
            for k in range(3):
                u = v[2 * k:2 * k + 2]
                inner = inner + tnp.sum((u * u[1]) ** 2) + tnp.sin(u[0] * u[1])
            total = total + inner ** 2
        return total

    x = np.linspace(-0.7, 0.9, 12)
    g = sc.gradient(top, "y", "x")
    # the primal values of the stages (for the square) and their adjoints: two mapped calls
    assert ops(g).count("vmap") == 2 and "sin" not in ops(g)
    np.testing.assert_allclose(g(x), ta.grad(ref)(x), rtol=1e-13)
    np.testing.assert_allclose(sc.hessian(top, "y", "x")(x), ta.hessian(ref)(x), rtol=1e-12,
                               atol=1e-13)


def test_third_order_through_a_mapped_gradient():
    chain = chain_for(3)
    grad = sc.gradient(chain, "cost", "z")

    @sc.function(sc.G(sc.L("z", 4), sc.L("p", 1)), sc.L("s", ...))
    def g2(inputs):
        z, p = inputs
        return (grad((z, p)) ** 2).sum()

    z, p = np.array([0.3, -0.2, 0.5, 1.1]), np.array([0.9])
    ref = lambda z: tnp.sum(ta.grad(chain_ref)(z, p) ** 2)          # noqa: E731
    np.testing.assert_allclose(sc.gradient(g2, "s", "z")((z, p)), ta.grad(ref)(z), rtol=1e-12)
    np.testing.assert_allclose(sc.hessian(g2, "s", "z")((z, p)), ta.hessian(ref)(z),
                               rtol=1e-11, atol=1e-12)


# ---------------------------------------------------------------------------
# forward mode and sparse derivatives
# ---------------------------------------------------------------------------

def test_seed_sparse_jacobian_listing_is_one_mapped_call_and_one_gather():
    spjac = sc.sparse_jacobian(stages_for(4), "residuals", "zs")
    assert SEED_SPJAC.match(outer(spjac)), outer(spjac)
    zs = np.linspace(-1.0, 1.0, 8)
    pattern = spjac.output_sparsities[0]
    J = ta.jacfwd(stages_ref)(zs)
    np.testing.assert_allclose(spjac(zs), J[pattern.row, pattern.col], rtol=1e-15)
    x = sc.sym("zs", 8)
    assert pattern == sc.jacobian_sparsity(expand_calls([stages_for(4)(x)])[0], x)
    assert np.all(J[~pattern.to_mask()] == 0)
    # the stage derivative takes only z, its two seeds are constants of its body
    callee = next(n for n in topo_order(spjac.outputs) if n.op == "vmap").attrs["fn"]
    assert callee.input_names == ["z"] and callee.name.startswith("pair_stage_fwd2c")


def test_overlapping_windows_sparse_jacobian_from_the_stage_pattern():
    @sc.function(sc.L("z", 9), sc.L("r", ...))
    def windows(z):
        return sc.vmap(pair_stage, 4, [(z, 1, 2)])      # stage k reads z[1+2k], z[2+2k]

    spjac = sc.sparse_jacobian(windows, "r", "z")
    z = np.linspace(0.2, 1.4, 9)
    ref = lambda z: stages_ref(z[1:])                   # noqa: E731
    J = ta.jacfwd(ref)(z)
    P = spjac.output_sparsities[0]
    x = sc.sym("z", 9)
    assert P == sc.jacobian_sparsity(expand_calls([windows(x)])[0], x)
    np.testing.assert_allclose(spjac(z), J[P.row, P.col], rtol=1e-15)

    @sc.function(sc.L("z", 5), sc.L("r", ...))
    def overlap(z):
        return sc.vmap(pair_stage, 4, [(z, 0, 1)])
    spjac = sc.sparse_jacobian(overlap, "r", "z")
    z = np.array([0.3, -0.5, 0.9, 1.2, -0.1])
    zz = np.stack([z[:-1], z[1:]], axis=1).reshape(-1)
    J = ta.jacfwd(lambda z: stages_ref(tnp.stack([z[:-1], z[1:]], axis=1).reshape(-1)))(z)
    P = spjac.output_sparsities[0]
    assert zz.size == 8 and P.shape == (8, 5)
    np.testing.assert_allclose(spjac(z), J[P.row, P.col], rtol=1e-15)


def multiple_shooting(n):
    """Defects x_{k+1} - F(x_k) of a two-state model over n stages."""
    @sc.function(sc.G(sc.L("x", 2), sc.L("xn", 2)), sc.L("d", ...))
    def defect(inputs):
        x, xn = inputs
        return xn - sc.stack([x[0] + 0.1 * x[1].sin(), x[1] - 0.1 * x[0] * x[1]])

    @sc.function(sc.L("w", 2 * (n + 1)), sc.L("defects", ...))
    def shooting(w):
        return sc.vmap(defect, n, [w[:2 * n], w[2:]])

    def ref(w):
        x, xn = w[:2 * n].reshape(n, 2), w[2:].reshape(n, 2)
        F = tnp.stack([x[:, 0] + 0.1 * tnp.sin(x[:, 1]), x[:, 1] - 0.1 * x[:, 0] * x[:, 1]],
                      axis=1)
        return (xn - F).reshape(-1)
    return shooting, ref


@pytest.mark.parametrize("n", [3, 6, 50])
def test_multiple_shooting_colors_the_global_pattern_and_stays_mapped(n):
    shooting, ref = multiple_shooting(n)
    spjac = sc.sparse_jacobian(shooting, "defects", "w")
    P = spjac.output_sparsities[0]
    assert max(sc.column_coloring(P)) + 1 == 4            # however many stages
    assert ops(spjac).count("vmap") == 1 and nodes(spjac) < 20
    w = np.linspace(-0.5, 0.8, 2 * (n + 1))
    J = ta.jacfwd(ref)(w)
    assert np.all(J[~P.to_mask()] == 0)
    np.testing.assert_allclose(spjac(w), J[P.row, P.col], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(sc.jacobian(shooting, "defects", "w")(w), J, rtol=1e-14,
                               atol=1e-15)


def test_forward_mode_with_a_symbolic_seed_and_batched_directions():
    chain = chain_for(5)

    @sc.function(sc.G(sc.L("z", 6), sc.L("p", 1)), sc.L("r", ...))
    def links(inputs):
        z, p = inputs
        return sc.vmap(link, 5, [(z, 0, 1), p])

    z, p = np.linspace(-0.4, 1.1, 6), np.array([0.8])
    v = np.linspace(1.0, -1.0, 6)
    ref = lambda z: p[0] * (z[1:] - tnp.sin(z[:-1])) ** 2          # noqa: E731
    fwd = sc.forward(links, "r", "z")
    assert ops(fwd).count("vmap") == 1
    np.testing.assert_allclose(fwd(((z, p), v)), ta.jvp(ref, (z,), (v,))[1], rtol=1e-14)
    many = sc.forward(links, "r", "z", directions=3)
    V = np.stack([v, v ** 2, np.ones(6)])
    want = np.stack([ta.jvp(ref, (z,), (d,))[1] for d in V])
    np.testing.assert_allclose(many(((z, p), V)), want, rtol=1e-14)
    np.testing.assert_allclose(sc.forward(chain, "cost", "z")(((z, p), v)),
                               ta.grad(chain_ref)(z, p) @ v, rtol=1e-14)


@pytest.mark.parametrize("n", [4, 50])
def test_mapped_sparse_hessians(n):
    total = arrow_for(n)
    hess = sc.sparse_hessian(total, "cost", "w")
    P = hess.output_sparsities[0]
    assert max(sc.star_coloring(P)) + 1 == 2
    assert all(not n.attrs["fn"].name.startswith("stage_fwd") or "c" in n.attrs["callee"]
               for n in topo_order(hess.outputs) if n.op == "vmap")
    w = np.linspace(-1.0, 2.0, n + 1)
    H = ta.hessian(arrow_ref)(w)
    np.testing.assert_allclose(hess(w), H[P.row, P.col], rtol=1e-13, atol=1e-14)
    if jax is not None:
        Hj = np.asarray(jax.hessian(lambda w: arrow_ref(w, jnp))(w))
        np.testing.assert_allclose(hess(w), Hj[P.row, P.col], rtol=1e-12, atol=1e-13)
    chain = chain_for(n)
    ch = sc.sparse_hessian(chain, "cost", "z")
    Pc = ch.output_sparsities[0]
    z, p = np.linspace(-0.5, 0.9, n + 1), np.array([1.3])
    Hc = ta.hessian(chain_ref)(z, p)
    np.testing.assert_allclose(ch((z, p)), Hc[Pc.row, Pc.col], rtol=1e-13, atol=1e-13)
    g = sc.gradient(chain, "cost", "z")
    Hfd = central(lambda z: g((z, p)), z)
    np.testing.assert_allclose(ch((z, p)), Hfd[Pc.row, Pc.col], rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# caching and scale
# ---------------------------------------------------------------------------

def test_stage_derivative_functions_are_built_once_per_callee_and_request():
    @sc.function(sc.L("z", 2), sc.L("residual", ...))
    def fresh(z):
        return sc.stack([z[0] * z[1].exp(), z[1] ** 3])

    def stages(n):
        @sc.function(sc.L("zs", 2 * n), sc.L("r", ...))
        def f(zs):
            return sc.vmap(fresh, n, [zs])
        return f

    before = dict(_stages.BUILDS)
    first = sc.sparse_jacobian(stages(4), "r", "zs")
    built = {k: _stages.BUILDS[k] - before.get(k, 0) for k in _stages.BUILDS}
    assert built.get("forward") == 1
    mid = dict(_stages.BUILDS)
    again = sc.sparse_jacobian(stages(9), "r", "zs")      # same stage, same seeds
    assert dict(_stages.BUILDS) == mid
    callee = lambda f: next(n for n in topo_order(f.outputs) if n.op == "vmap").attrs["fn"]
    assert callee(first) is callee(again)
    chain = chain_for(4)
    sc.gradient(chain, "cost", "z")
    mid = dict(_stages.BUILDS)
    sc.gradient(chain_for(7), "cost", "z")
    sc.gradient(chain, "cost", "z")
    assert dict(_stages.BUILDS) == mid


@pytest.mark.parametrize("make", [
    lambda n: sc.gradient(chain_for(n), "cost", "z"),
    lambda n: sc.gradient(chain_for(n), "cost", "p"),
    lambda n: sc.sparse_hessian(arrow_for(n), "cost", "w"),
    lambda n: sc.sparse_hessian(chain_for(n), "cost", "z"),
    lambda n: sc.sparse_jacobian(stages_for(n), "residuals", "zs"),
    lambda n: sc.sparse_jacobian(multiple_shooting(n)[0], "defects", "w"),
])
def test_derivative_graphs_do_not_grow_with_the_stages(make):
    assert nodes(make(4)) == nodes(make(10_000))


def test_long_mapped_calls_are_evaluated_in_c():
    n = 200
    total = arrow_for(n)
    hess = sc.sparse_hessian(total, "cost", "w")
    assert ops(hess).count("vmap") == 2
    assert any(x.op == "vmap" for x in topo_order(hess.simplified_outputs()))
    w = np.linspace(-1.0, 2.0, n + 1)
    P = hess.output_sparsities[0]
    H = ta.hessian(arrow_ref)(w)
    np.testing.assert_allclose(hess(w), H[P.row, P.col], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(hess(w), hess.evaluate([w], simplify=False)[0], rtol=1e-14,
                               atol=1e-14)
    np.testing.assert_allclose(hess(w * 0.5), ta.hessian(arrow_ref)(w * 0.5)[P.row, P.col],
                               rtol=1e-13, atol=1e-13)
    short = sc.sparse_hessian(arrow_for(_mapped.RUN_IN_C_FROM - 1), "cost", "w")
    assert not any(x.op == "vmap" for x in topo_order(short.simplified_outputs()))


def test_window_and_broadcast_errors():
    w = sc.sym("w", 5)
    with pytest.raises(sc.LayoutError, match=r"\(array, start, stride\)"):
        sc.vmap(link, 4, [(w, 0), w[:1]])
    with pytest.raises(sc.LayoutError, match="non-negative int"):
        sc.vmap(link, 4, [sc.window(w, -1, 1), w[:1]])
    with pytest.raises(sc.LayoutError, match="non-negative int"):
        sc.vmap(link, 4, [(w, 0, 1.5), w[:1]])
    with pytest.raises(sc.ScalyShapeError, match="sc.broadcast needs an expression of 1"):
        sc.vmap(link, 4, [(w, 0, 1), sc.broadcast(w[:2])])


def test_lagrangian_hessian_of_mapped_defects():
    n = 5
    shooting, ref = multiple_shooting(n)
    H = sc.hessian(shooting, "defects", "w", weights=True)
    w = np.linspace(-0.5, 0.8, 2 * (n + 1))
    lam = np.linspace(1.0, 2.0, 2 * n).reshape(n, 2)
    want = ta.hessian(lambda w: tnp.sum(lam.reshape(-1) * ref(w)))(w)
    np.testing.assert_allclose(H((w, lam)), want, rtol=1e-13, atol=1e-14)
    assert "vmap" in ops(H)


def test_stage_with_a_loop_and_an_integer_input():
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def step(x, u):
        return x + 0.1 * sc.stack([x[1], u - x[0].sin()])

    @sc.function(sc.arg("x0", 2), sc.arg("us", 3), sc.arg("k", sc.TensorType((), np.int64)),
                 outputs=sc.arg("c", ()))
    def rollout(x0, us, k):
        final, _ = sc.scan(step, x0, (us,), length=3)
        return sc.sumsqr(final) * (1.0 + 0.0 * k)

    n = 9

    @sc.function(sc.arg("x0s", 2 * n), sc.arg("us", 3 * n), outputs=sc.arg("cost", ()))
    def many(x0s, us):
        return sc.vmap(rollout, n, [x0s, us, sc.const(np.int64(2))]).sum()

    def ref_one(x, u):
        for j in range(3):
            x = x + 0.1 * tnp.stack([x[1], u[j] - tnp.sin(x[0])])
        return tnp.sum(x * x)

    def ref(x0s, us):
        return sum(ref_one(x0s[2 * k:2 * k + 2], us[3 * k:3 * k + 3]) for k in range(n))

    x0s, us = np.linspace(-1.0, 1.0, 2 * n), np.linspace(0.5, -0.5, 3 * n)
    assert many(x0s, us) == pytest.approx(float(ref(x0s, us)), rel=1e-14)
    g = sc.gradient(many, "cost", "us")
    assert ops(g).count("vmap") == 1
    np.testing.assert_allclose(g(x0s, us), ta.grad(ref, argnums=1)(x0s, us), rtol=1e-13)
    spH = sc.sparse_hessian(many, "cost", "us")
    P = spH.output_sparsities[0]
    Hd = ta.hessian(lambda u: ref(x0s, u))(us)
    assert np.all(Hd[~P.to_mask()] == 0)
    np.testing.assert_allclose(spH(x0s, us), Hd[P.row, P.col], rtol=1e-12, atol=1e-13)
