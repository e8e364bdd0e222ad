"""ODE solves: tapead.scipy.integrate.odeint and tapead.integrate.solve_ivp.

* values against closed forms (exponential decay, the harmonic oscillator,
  linear systems through ``expm``) and against scipy's own solvers;
* first derivatives with respect to ``y0``, the output times and ``args``
  against closed forms (``expm_frechet``), central differences and JAX's
  ``odeint``; reverse mode (forward sensitivities for small problems, the
  adjoint system otherwise; both forced through ``adjoint=``) against forward
  mode and against each other;
* second derivatives (``hessian``, ``hvp``, forward over forward, reverse over
  reverse) against differences of gradients and a closed form;
* a stiff problem (Robertson's kinetics) with LSODA, BDF and Radau;
* closures over traced values, pytree arguments, float32, vmap, jit;
* the recorded right-hand-side kernel and its fallbacks;
* error paths.

An integrator's result carries its tolerance: each comparison says which
tolerances give which agreement.
"""
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import NonDifferentiableError, ShapeError
from tapead.integrate import problems, solve_ivp
from tapead.scipy.integrate import odeint
from tapead._tree import tree_flatten

TIGHT = dict(rtol=1e-12, atol=1e-12)


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _fd(fun, x, h=1e-3):
    """Five-point central differences of a scalar function (error ~ h**4)."""
    x = np.array(x, dtype=np.float64)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = h
        out[i] = (-fun(x + 2 * e) + 8 * fun(x + e) - 8 * fun(x - e) + fun(x - 2 * e)) / (12 * h)
    return out


def lotka_volterra(y, t, r, A):
    """Three species, dy_i/dt = y_i (r_i + sum_j A_ij y_j)."""
    return y * (r + A @ y)


R = np.array([1.0, -0.6, -0.4])
A3 = np.array([[-0.05, -0.8, 0.0], [0.5, 0.0, -0.6], [0.0, 0.4, 0.0]])
Y3 = np.array([1.0, 0.5, 0.3])


# ---------------------------------------------------------------------------
# values against closed forms and against scipy
# ---------------------------------------------------------------------------

def test_exponential_decay_matches_the_closed_form():
    t = np.linspace(0.0, 3.0, 7)
    ys = odeint(lambda y, t, k: -k * y, np.array([2.0, -1.0]), t, 0.8, **TIGHT)
    assert ys.shape == (7, 2)
    assert _rel(ys, np.exp(-0.8 * t)[:, None] * [2.0, -1.0]) < 1e-10


@pytest.mark.parametrize("method", ["LSODA", "RK45", "DOP853", "Radau", "BDF"])
def test_harmonic_oscillator_matches_the_closed_form(method):
    w = 1.7
    t = np.linspace(0.0, 4.0, 9)
    ys = odeint(lambda y, t: np.array([y[1], -w * w * y[0]]), np.array([1.0, 0.0]), t,
                rtol=1e-11, atol=1e-11, method=method)
    ref = np.stack([np.cos(w * t), -w * np.sin(w * t)], axis=1)
    assert _rel(ys, ref) < 1e-7


def test_linear_system_matches_expm():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4)) * 0.5
    y0 = rng.normal(size=4)
    t = np.array([0.0, 0.3, 1.0, 2.0])
    ys = odeint(lambda y, t, A: A @ y, y0, t, A, **TIGHT)
    ref = np.stack([scipy.linalg.expm(A * s) @ y0 for s in t])
    assert _rel(ys, ref) < 1e-10


def test_values_are_scipys_bit_for_bit_plain_and_traced():
    t = np.linspace(0.0, 10.0, 30)
    ref = scipy.integrate.odeint(lotka_volterra, Y3, t, args=(R, A3))
    np.testing.assert_array_equal(odeint(lotka_volterra, Y3, t, R, A3), ref)
    np.testing.assert_array_equal(odeint(lotka_volterra, Y3, t, args=(R, A3)), ref)
    seen = []

    def loss(r):
        ys = odeint(lotka_volterra, Y3, t, r, A3)
        seen.append(np.array(ys.primal))
        return tnp.sum(ys)
    ta.grad(loss)(R)
    np.testing.assert_array_equal(seen[0], ref)
    sol = scipy.integrate.solve_ivp(lambda s, y: lotka_volterra(y, s, R, A3), (0.0, 12.0),
                                    Y3, t_eval=t, method="DOP853", rtol=1e-9, atol=1e-9)
    got = []

    def loss_ivp(r):
        s = solve_ivp(lambda s, y: lotka_volterra(y, s, r, A3), (0.0, 12.0), Y3, t_eval=t,
                      method="DOP853", rtol=1e-9, atol=1e-9)
        got.append(np.array(s.y.primal))
        return tnp.sum(s.y)
    ta.grad(loss_ivp)(R)
    np.testing.assert_array_equal(got[0], sol.y)


def test_solve_ivp_without_tracers_is_scipys():
    sol = solve_ivp(lambda t, y: -y, (0.0, 1.0), [1.0, 2.0], dense_output=True)
    ref = scipy.integrate.solve_ivp(lambda t, y: -y, (0.0, 1.0), [1.0, 2.0],
                                    dense_output=True)
    np.testing.assert_array_equal(sol.y, ref.y)
    assert sol.sol is not None and sol.success


# ---------------------------------------------------------------------------
# first derivatives
# ---------------------------------------------------------------------------

def test_linear_system_derivatives_match_expm_frechet():
    """L = <w, y(T)>, y(T) = expm(A T) y0: dL/dy0 = expm(A T)^T w,
    dL/dA = T L_exp((A T)^T, w y0^T), dL/dT = w . A y(T)."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3)) * 0.6
    y0, w = rng.normal(size=3), rng.normal(size=3)
    T = 1.3

    def loss(y0, A, t):
        return tnp.sum(odeint(lambda y, t, A: A @ y, y0, t, A, **TIGHT)[-1] * w)
    t = np.array([0.0, T])
    g_y0, g_A, g_t = ta.grad(loss, argnums=(0, 1, 2))(y0, A, t)
    E = scipy.linalg.expm(A * T)
    assert _rel(g_y0, E.T @ w) < 1e-10
    assert _rel(g_A, T * scipy.linalg.expm_frechet((A * T).T, np.outer(w, y0))[1]) < 1e-9
    yT = E @ y0
    assert _rel(g_t, [-w @ A @ yT, w @ A @ yT]) < 1e-9   # moving t0 shifts the start


def _lv_loss(method="LSODA", tol=TIGHT, adjoint="auto"):
    t = np.linspace(0.0, 6.0, 8)
    data = np.cos(t)[:, None] * [0.2, 0.1, 0.05] + 1.0

    def loss(y0, r, A, t):
        ys = odeint(lotka_volterra, y0, t, r, A, method=method, adjoint=adjoint, **tol)
        return tnp.sum((ys - data) ** 2)
    return loss, t


@pytest.mark.parametrize("adjoint", ["forward", "backsolve"])
@pytest.mark.parametrize("method", ["LSODA", "DOP853", "RK45"])
def test_gradients_match_finite_differences(method, adjoint):
    loss, t = _lv_loss(method, adjoint=adjoint)
    g = ta.grad(loss, argnums=(0, 1, 2, 3))(Y3, R, A3, t)
    refs = (_fd(lambda v: loss(v, R, A3, t), Y3), _fd(lambda v: loss(Y3, v, A3, t), R),
            _fd(lambda v: loss(Y3, R, v, t), A3), _fd(lambda v: loss(Y3, R, A3, v), t))
    for got, ref in zip(g, refs):
        assert _rel(got, ref) < 1e-7, (got, ref)


@pytest.mark.parametrize("adjoint", ["auto", "backsolve"])
def test_reverse_mode_equals_forward_mode(adjoint):
    loss, t = _lv_loss(adjoint=adjoint)

    def sol(y0, r, A, t):
        return odeint(lotka_volterra, y0, t, r, A, adjoint=adjoint, **TIGHT)
    for k, x in enumerate((Y3, R, A3, t)):
        J_rev = ta.jacrev(sol, argnums=k)(Y3, R, A3, t)
        J_fwd = ta.jacfwd(sol, argnums=k)(Y3, R, A3, t)
        assert J_rev.shape == (len(t), 3) + np.shape(x)
        assert _rel(J_rev, J_fwd) < 1e-9
    v = (0.1 * Y3, -0.2 * R, 0.3 * A3, np.linspace(0.0, 0.05, len(t)))
    _, tangent = ta.jvp(loss, (Y3, R, A3, t), v)
    g = ta.grad(loss, argnums=(0, 1, 2, 3))(Y3, R, A3, t)
    assert _rel(tangent, sum(np.sum(a * b) for a, b in zip(g, v))) < 1e-9


@pytest.mark.parametrize("adjoint", ["forward", "backsolve"])
@pytest.mark.parametrize("tol, agree", [(1e-10, 5e-6), (1e-12, 1e-7)])
def test_gradients_match_jax_odeint(tol, agree, adjoint):
    """Both solvers at rtol = atol = tol: 1e-10 agrees to about 1e-7, 1e-12 to
    about 1e-9 (the solvers differ: LSODA, with the sensitivities or with the
    adjoint by DOP853, here; Dormand-Prince 5(4) in JAX)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jax_odeint
    t = np.linspace(0.0, 6.0, 8)
    data = np.cos(t)[:, None] * [0.2, 0.1, 0.05] + 1.0

    def loss(m, solve, y0, r, A, t):
        ys = solve(lambda y, t, r, A: y * (r + A @ y), y0, t, r, A, rtol=tol, atol=tol)
        return m.sum((ys - data) ** 2)

    def ours(*a, **kw):
        return odeint(*a, adjoint=adjoint, **kw)
    g = ta.grad(lambda *a: loss(tnp, ours, *a), argnums=(0, 1, 2, 3))(Y3, R, A3, t)
    gj = jax.grad(lambda *a: loss(jnp, jax_odeint, *a), argnums=(0, 1, 2, 3))(
        *(jnp.asarray(x) for x in (Y3, R, A3, t)))
    for a, b in zip(g, gj):
        assert _rel(a, np.asarray(b)) < agree


def test_the_three_reverse_passes_agree():
    loss, t = _lv_loss()
    g = {}
    for mode in ("forward", "backsolve", "checkpointed"):
        def f(r, A, mode=mode):
            return tnp.sum(odeint(lotka_volterra, Y3, t, r, A, adjoint=mode, **TIGHT) ** 2)
        g[mode] = np.concatenate([np.ravel(x) for x in ta.grad(f, argnums=(0, 1))(R, A3)])
    assert _rel(g["backsolve"], g["checkpointed"]) < 1e-9
    assert _rel(g["forward"], g["backsolve"]) < 1e-9


def _fit_loss(adjoint, tol=1e-12):
    """The benchmark's fit: 200 output times in [0, 30], 12 parameters."""
    t = np.linspace(0.0, 30.0, 200)
    data = odeint(lotka_volterra, Y3, t, R * 1.05, A3 * 0.95, rtol=1e-13, atol=1e-13)

    def loss(r, A):
        ys = odeint(lotka_volterra, Y3, t, r, A, rtol=tol, atol=tol, adjoint=adjoint)
        return tnp.sum((ys - data) ** 2)
    return loss


def test_forward_sensitivities_and_adjoint_agree_over_many_output_times():
    """The reverse pass by forward sensitivities (the default here: 15 inputs)
    and by the adjoint system, at rtol = atol = 1e-12: about 1e-10 apart."""
    gs = {}
    for mode in ("auto", "forward", "backsolve"):
        g = ta.grad(_fit_loss(mode), argnums=(0, 1))(R, A3)
        gs[mode] = np.concatenate([np.ravel(x) for x in g])
    assert np.array_equal(gs["auto"], gs["forward"])
    assert _rel(gs["forward"], gs["backsolve"]) < 1e-9
    fd = _fd(lambda r: _fit_loss("forward")(r, A3), R, h=1e-3)
    assert _rel(gs["forward"][:3], fd) < 1e-6


def test_a_traced_initial_state_adds_its_directions():
    """With y0 untraced the sensitivities are those of the 12 parameters only;
    with y0 traced, of all 15 inputs: the same parameter cotangents (to the
    tolerance) and y0's agreeing with the adjoint's."""
    t = np.linspace(0.0, 30.0, 200)
    data = odeint(lotka_volterra, Y3, t, R * 1.05, A3 * 0.95, rtol=1e-13, atol=1e-13)

    def loss(y0, r, A, adjoint="auto"):
        ys = odeint(lotka_volterra, y0, t, r, A, adjoint=adjoint, **TIGHT)
        return tnp.sum((ys - data) ** 2)
    g_fixed = ta.grad(loss, argnums=(1, 2))(Y3, R, A3)
    g_all = ta.grad(loss, argnums=(0, 1, 2))(Y3, R, A3)
    g_adj = ta.grad(loss, argnums=(0, 1, 2))(Y3, R, A3, "backsolve")
    for a, b in zip(g_fixed, g_all[1:]):
        assert _rel(a, b) < 1e-9
    for a, b in zip(g_all, g_adj):
        assert _rel(a, b) < 1e-9


# ---------------------------------------------------------------------------
# second derivatives
# ---------------------------------------------------------------------------

def _oscillator_loss(k, adjoint="auto"):
    t = np.array([0.0, 0.5, 1.2])

    def f(y, t, k):
        return tnp.stack([y[1], -k[0] * y[0] - k[1] * y[1] + 0.3 * tnp.sin(t)])
    return tnp.sum(odeint(f, np.array([1.0, 0.0]), t, k, adjoint=adjoint, **TIGHT) ** 2)


K2 = np.array([2.0, 0.3])


@pytest.mark.parametrize("adjoint", ["forward", "backsolve"])
def test_hessian_matches_differences_of_the_gradient(adjoint):
    def loss(k):
        return _oscillator_loss(k, adjoint)
    H = ta.hessian(loss)(K2)
    ref = np.stack([_fd(lambda k, j=j: ta.grad(loss)(k)[j], K2) for j in range(2)])
    assert _rel(H, ref) < 1e-7
    assert _rel(H, H.T) < 1e-9
    for how in (ta.jacfwd(ta.jacfwd(loss)), ta.jacrev(ta.jacrev(loss)),
                ta.jacrev(ta.jacfwd(loss))):
        assert _rel(how(K2), H) < 1e-9
    v = np.array([0.4, -1.0])
    assert _rel(ta.hvp(loss, (K2,), (v,)), H @ v) < 1e-9


def test_hessians_by_the_two_reverse_passes_agree():
    H = {m: ta.hessian(lambda k, m=m: _oscillator_loss(k, m))(K2)
         for m in ("forward", "backsolve")}
    assert _rel(H["forward"], H["backsolve"]) < 1e-9


def test_second_derivative_of_decay_matches_the_closed_form():
    """y(T) = y0 exp(-k T): d2/dk2 = y0 T**2 exp(-k T), d2/dk dy0 = -T exp(-k T)."""
    T, k, y0 = 1.5, 0.7, 2.0

    def final(p):
        return odeint(lambda y, t, k: -k * y, p[1], np.array([0.0, T]), p[0], **TIGHT)[-1]
    H = ta.hessian(final)(np.array([k, y0]))
    ref = np.array([[y0 * T * T * np.exp(-k * T), -T * np.exp(-k * T)],
                    [-T * np.exp(-k * T), 0.0]])
    assert np.max(np.abs(H - ref)) < 1e-9


def test_hessian_with_respect_to_the_output_times():
    def loss(t):
        return tnp.sum(odeint(lambda y, t: -y * y + tnp.cos(t), np.array([0.5]), t,
                              **TIGHT) ** 2)
    t = np.array([0.0, 0.7, 1.5])
    H = ta.hessian(loss)(t)
    ref = np.stack([_fd(lambda s, j=j: ta.grad(loss)(s)[j], t) for j in range(3)])
    assert _rel(H, ref) < 1e-7


# ---------------------------------------------------------------------------
# a stiff problem: Robertson's chemical kinetics
# ---------------------------------------------------------------------------

def robertson(y, t, k):
    return tnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                      k[1] * y[1] ** 2])


LOG_K = np.log([0.04, 3e7, 1e4])
T_ROB = np.array([0.0, 1.0, 10.0, 40.0])
W_ROB = np.array([1.0, 1e4, 1.0])
STIFF_TOL = dict(rtol=1e-10, atol=1e-14)


def _robertson_loss(how, adjoint="auto"):
    if how == "odeint":
        def loss(lk):
            ys = odeint(robertson, np.array([1.0, 0.0, 0.0]), T_ROB, tnp.exp(lk),
                        mxstep=100000, adjoint=adjoint, **STIFF_TOL)
            return tnp.sum(ys[1:] * W_ROB)
    else:
        def loss(lk):
            sol = solve_ivp(lambda t, y, k: robertson(y, t, k), (0.0, T_ROB[-1]),
                            np.array([1.0, 0.0, 0.0]), method=how, t_eval=T_ROB[1:],
                            args=(tnp.exp(lk),), adjoint=adjoint, **STIFF_TOL)
            return tnp.sum(sol.y.T * W_ROB)
    return loss


@pytest.mark.parametrize("adjoint", ["forward", "checkpointed"])
@pytest.mark.parametrize("how", ["odeint", "LSODA", "BDF", "Radau"])
def test_stiff_robertson_gradients(how, adjoint):
    loss = _robertson_loss(how, adjoint)
    g = ta.grad(loss)(LOG_K)
    assert _rel(g, ta.jacfwd(loss)(LOG_K)) < 1e-6       # reverse vs forward mode
    assert _rel(g, _fd(loss, LOG_K, h=1e-3)) < 1e-4      # differences carry the tolerance


def test_stiff_values_match_scipy():
    ys = odeint(robertson, np.array([1.0, 0.0, 0.0]), T_ROB, np.exp(LOG_K), **STIFF_TOL)
    ref = scipy.integrate.odeint(robertson, np.array([1.0, 0.0, 0.0]), T_ROB,
                                 args=(np.exp(LOG_K),), **STIFF_TOL)
    np.testing.assert_array_equal(ys, ref)
    sol = solve_ivp(lambda t, y: robertson(y, t, np.exp(LOG_K)), (0.0, 40.0),
                    np.array([1.0, 0.0, 0.0]), method="Radau", t_eval=T_ROB, **STIFF_TOL)
    assert _rel(sol.y.T, ref) < 1e-6


def test_second_order_of_a_stiff_solve():
    """The checkpointed reverse pass cannot be differentiated again (the state
    is not integrated backwards): a clear error; forward over forward works,
    and so does the Hessian when the reverse pass is by forward sensitivities
    (the default for this problem's six inputs)."""
    loss = _robertson_loss("odeint", "checkpointed")
    with pytest.raises(NonDifferentiableError, match="jacfwd"):
        ta.hessian(loss)(LOG_K)
    with pytest.raises(NonDifferentiableError, match="checkpointed"):
        ta.hvp(loss, (LOG_K,), (np.ones(3),))
    H = ta.jacfwd(ta.jacfwd(loss))(LOG_K)
    v, h = np.array([1.0, -0.5, 0.3]), 1e-3
    J = lambda s: ta.jacfwd(loss)(LOG_K + s * v)            # noqa: E731
    ref = (-J(2 * h) + 8 * J(h) - 8 * J(-h) + J(-2 * h)) / (12 * h)
    assert _rel(H @ v, ref) < 1e-4
    assert _rel(H, H.T) < 1e-6
    H_auto = ta.hessian(_robertson_loss("odeint"))(LOG_K)
    assert _rel(H_auto, H) < 1e-6


# ---------------------------------------------------------------------------
# closures, pytrees, dtypes, vmap, jit
# ---------------------------------------------------------------------------

def test_a_closure_over_traced_values_equals_passing_them_in_args():
    loss, t = _lv_loss()

    def closed(r, A):
        return tnp.sum(odeint(lambda y, t: lotka_volterra(y, t, r, A), Y3, t, **TIGHT) ** 2)

    def passed(r, A):
        return tnp.sum(odeint(lotka_volterra, Y3, t, r, A, **TIGHT) ** 2)
    for a, b in zip(ta.grad(closed, argnums=(0, 1))(R, A3), ta.grad(passed, argnums=(0, 1))(R, A3)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    v = np.array([1.0, 0.0, -1.0])
    np.testing.assert_allclose(ta.hvp(lambda r: closed(r, A3), (R,), (v,)),
                               ta.hvp(lambda r: passed(r, A3), (R,), (v,)), rtol=1e-10)
    np.testing.assert_allclose(ta.jvp(lambda r: closed(r, A3), (R,), (v,))[1],
                               ta.jvp(lambda r: passed(r, A3), (R,), (v,))[1], rtol=1e-12)


def test_a_bound_methods_traced_attribute_is_an_input():
    class Model:
        def rhs(self, y, t):
            return -self.k * y

    def loss(k):
        m = Model()
        m.k = k
        return tnp.sum(odeint(m.rhs, np.ones(2), np.array([0.0, 1.0]), **TIGHT))
    np.testing.assert_allclose(ta.grad(loss)(0.5), -2 * np.exp(-0.5), rtol=1e-9)


def test_a_traced_value_tapead_cannot_see_is_refused():
    class Holder:
        pass

    class Model:
        def rhs(self, y, t):
            return -self.held[0].k * y

    def loss(k):
        m, h = Model(), Holder()
        h.k = k
        m.held = [h]                 # an object inside a list: not followed
        return tnp.sum(odeint(m.rhs, np.ones(2), np.array([0.0, 1.0])))
    with pytest.raises(ValueError, match="Pass it through args"):
        ta.grad(loss)(0.5)


def test_pytree_args_and_a_matrix_state():
    t = np.array([0.0, 0.5, 1.0])
    params = {"a": 0.3, "M": np.array([[1.0, 0.2], [0.1, 1.0]])}

    def loss(p, Y0):
        return tnp.sum(odeint(lambda Y, t, p: -p["a"] * Y @ p["M"], Y0, t, p, **TIGHT) ** 2)
    g_p, g_Y = ta.grad(loss, argnums=(0, 1))(params, np.eye(2))
    assert set(g_p) == {"a", "M"} and g_Y.shape == (2, 2)
    assert _rel(g_p["a"], _fd(lambda a: loss({"a": float(a), "M": params["M"]}, np.eye(2)),
                               0.3)) < 1e-7
    assert _rel(g_Y, _fd(lambda Y: loss(params, Y), np.eye(2))) < 1e-7
    assert odeint(lambda Y, t, p: -p["a"] * Y @ p["M"], np.eye(2), t, params).shape == (3, 2, 2)


def test_non_float_args_pass_through():
    def f(y, t, k, n, name):
        assert isinstance(n, int) and name == "decay"
        return -k * y ** n
    g = ta.grad(lambda k: odeint(f, 1.0, np.array([0.0, 1.0]), k, 1, "decay", **TIGHT)[-1])(0.5)
    assert abs(g + np.exp(-0.5)) < 1e-10


def test_a_scalar_state():
    ys = odeint(lambda y, t: -y, 2.0, np.array([0.0, 1.0]))
    assert ys.shape == (2,)
    g = ta.grad(lambda y0: odeint(lambda y, t: -y, y0, np.array([0.0, 1.0]), **TIGHT)[-1])(2.0)
    assert abs(g - np.exp(-1.0)) < 1e-10


def test_float32_in_float32_out():
    y0 = np.ones(2, np.float32)
    t = np.array([0.0, 1.0])
    assert odeint(lambda y, t: -y, y0, t).dtype == np.float32
    g = ta.grad(lambda y0: tnp.sum(odeint(lambda y, t: -y, y0, t)))(y0)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 1.0 + np.exp(-1.0), rtol=1e-6)


def test_vmap_over_odeint_equals_the_loop():
    t = np.linspace(0.0, 2.0, 5)

    def final(k):
        return odeint(lambda y, t, k: -k * y + tnp.sin(t), np.array([1.0, 0.5]), t, k,
                      **TIGHT)[-1]
    ks = np.array([0.5, 0.7, 1.1])
    np.testing.assert_allclose(ta.vmap(final)(ks), np.stack([final(k) for k in ks]),
                               rtol=1e-14)
    g = ta.grad(lambda k: tnp.sum(final(k)))
    np.testing.assert_allclose(ta.vmap(g)(ks), [g(k) for k in ks], rtol=1e-14)


def test_jit_of_a_gradient_through_odeint():
    t = np.linspace(0.0, 2.0, 5)

    def loss(k):
        return tnp.sum(odeint(lambda y, t, k: -k * y + tnp.sin(t), np.array([1.0, 0.5]), t, k,
                              **TIGHT))
    jg = ta.jit(ta.grad(loss))
    for k in (0.7, 0.9):
        assert abs(jg(k) - ta.grad(loss)(k)) < 1e-13


def test_lists_of_traced_values_as_state_and_times():
    def final(k, t1):
        return odeint(lambda y, t: -k * y, [1.0, k], [0.0, t1], **TIGHT)[-1, 1]
    gk, gt = ta.grad(final, argnums=(0, 1))(0.5, 2.0)
    assert abs(gk - (1.0 - 0.5 * 2.0) * np.exp(-1.0)) < 1e-10     # d/dk k exp(-2k)
    assert abs(gt + 0.25 * np.exp(-1.0)) < 1e-10                  # -k * k exp(-k t)


def test_tfirst_convention():
    t = np.array([0.0, 1.0])
    np.testing.assert_allclose(odeint(lambda t, y: -y, 1.0, t, tfirst=True, **TIGHT)[-1],
                               np.exp(-1.0), rtol=1e-10)


# ---------------------------------------------------------------------------
# solve_ivp
# ---------------------------------------------------------------------------

def test_solve_ivp_result_layout_and_gradients():
    t_eval = np.array([0.5, 1.0, 2.0])

    def sol(y0, k, t0):
        return solve_ivp(lambda t, y, k: -k * y, (t0, 2.0), y0, t_eval=t_eval, args=(k,),
                         rtol=1e-12, atol=1e-12, method="DOP853")

    s = sol(np.array([1.0, 2.0]), 0.4, 0.0)
    assert s.y.shape == (2, 3) and s.success and s.status == 0 and s.nfev > 0
    np.testing.assert_array_equal(s.t, t_eval)

    def loss(y0, k, t0):
        return tnp.sum(sol(y0, k, t0).y[:, -1])
    g_y0, g_k, g_t0 = ta.grad(loss, argnums=(0, 1, 2))(np.array([1.0, 2.0]), 0.4, 0.0)
    e = np.exp(-0.4 * 2.0)
    assert _rel(g_y0, [e, e]) < 1e-10
    assert abs(g_k - (-2.0 * 3.0 * e)) < 1e-9
    assert abs(g_t0 - 0.4 * 3.0 * e) < 1e-9        # y(2) = y0 exp(-k (2 - t0))


def test_solve_ivp_derivative_with_respect_to_t_eval():
    def loss(t_eval):
        s = solve_ivp(lambda t, y: -2.0 * y, (0.0, 3.0), np.array([1.0]), t_eval=t_eval,
                      rtol=1e-12, atol=1e-12)
        return tnp.sum(s.y)
    te = np.array([0.0, 0.5, 1.5])
    # t_eval[0] = t0 is an output time like the others (t0 stays where it is)
    np.testing.assert_allclose(ta.grad(loss)(te), [-2.0, -2 * np.exp(-1.0), -2 * np.exp(-3.0)],
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853", "LSODA", "BDF", "Radau"])
def test_solve_ivp_methods_backwards_in_time(method):
    """t_span decreasing: y(t) = y(1) exp(k (1 - t)) back to t = 0."""
    def final(k):
        s = solve_ivp(lambda t, y: -k * y, (1.0, 0.0), np.array([1.0]),
                      t_eval=np.array([0.5, 0.0]), method=method, rtol=1e-10, atol=1e-12)
        return s.y[0, -1]
    np.testing.assert_allclose(final(0.8), np.exp(0.8), rtol=1e-7)
    np.testing.assert_allclose(ta.grad(final)(0.8), np.exp(0.8), rtol=1e-6)


# ---------------------------------------------------------------------------
# the recorded right-hand side: scalar, array and eager recordings
# ---------------------------------------------------------------------------

def _kernel(func, y_shape, args):
    leaves, tree = tree_flatten(tuple(args))
    settings = problems.Settings("odeint", 1e-10, 1e-10, 0, 0.0, np.inf, (), "auto")
    prob = problems.UserProblem(func, y_shape, tree, leaves, list(range(len(leaves))),
                                [np.shape(v) for v in leaves], [], settings)
    p = np.concatenate([np.ravel(v) for v in leaves]) if leaves else np.zeros(0)
    return prob, p


@pytest.mark.parametrize("func, y0, args, mode", [
    (lotka_volterra, Y3, (R, A3), "scalar"),
    (lambda y, t, k: -k * y + tnp.sin(t) * 0.1, np.linspace(0, 1, 150), (0.7,), "array"),
    (lambda y, t, k: -k * y + np.sin(float(t)), np.ones(3), (0.7,), "eager"),
])
def test_kernel_modes_agree_with_tapead_vjp(func, y0, args, mode):
    prob, p = _kernel(func, np.shape(y0), args)
    rng = np.random.default_rng(3)
    with prob.at(p) as ev:
        for t in (0.3, 1.1):
            y = y0 * (1 + 0.1 * rng.normal(size=y0.shape))
            lam = rng.normal(size=y0.size)
            f, gy, gp = ev.vjp(y, t, lam)
            out, pull = ta.vjp(lambda y_, p_: prob.rhs(y_, t, p_), y, p)
            ref_gy, ref_gp = pull(lam)
            np.testing.assert_allclose(f, out, rtol=1e-13)
            np.testing.assert_allclose(gy, ref_gy, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(gp, ref_gp, rtol=1e-12, atol=1e-13)
            fj, Jy, Jp = ev.jacobian(y, t)
            np.testing.assert_allclose(lam @ Jy, ref_gy, rtol=1e-12, atol=1e-12)
    assert prob.kernel.mode == mode


def _tangent_ref(prob, p, y, t, Y, Pd):
    """``[f, df/dy Y_k + df/dp Pd_k]`` by ``ta.jvp`` of the problem's rhs."""
    f = prob.rhs(y, t, p)
    T = [ta.jvp(lambda y_, p_: prob.rhs(y_, t, p_), (y, p), (Yk, Pk))[1]
         for Yk, Pk in zip(Y, Pd)]
    return np.concatenate([np.asarray(f), np.ravel(T)])


@pytest.mark.parametrize("func, y0, args, mode", [
    (lotka_volterra, Y3, (R, A3), "scalar"),
    (lambda y, t, k: tnp.stack([-k * y[0], 2.0 + 0.0 * y[1]]), np.array([0.4, 1.0]),
     (0.7,), "scalar"),                                   # an element that is constant
    (lambda y, t, k: -k * y + tnp.sin(t) * 0.1, np.linspace(0, 1, 150), (0.7,), "array"),
    (lambda y, t, k: -k * y + np.sin(float(t)), np.ones(3), (0.7,), "eager"),
])
def test_the_tangent_systems_rhs_agrees_with_tapead_jvp(func, y0, args, mode):
    """The tangent system's right-hand side scipy calls (one replay and one
    sweep of the Jacobian tape on a scalar recording) equals ``ta.jvp``."""
    prob, p = _kernel(func, np.shape(y0), args)
    n, P, K = prob.n, prob.p, 4
    rng = np.random.default_rng(5)
    Pd = rng.normal(size=(K, P))
    tan = prob.tangent_problem(K)
    with tan.at(np.concatenate([p, Pd.ravel()])) as ev:
        for t in (0.3, 1.1, 0.7):
            y = y0 * (1 + 0.1 * rng.normal(size=y0.shape))
            Y = rng.normal(size=(K, n))
            got = ev.f(np.concatenate([y, Y.ravel()]), t)
            np.testing.assert_allclose(got, _tangent_ref(prob, p, y, t, Y, Pd), rtol=1e-12,
                                       atol=1e-12)
    assert prob.kernel.mode == mode
    assert (prob.kernel.jtape is not None) == (mode == "scalar")


def test_the_jacobian_tape_records_again_when_a_branch_flips():
    def f(y, t, k):
        return -k * y if y[0] > 0.5 else -2.0 * k * y
    prob, p = _kernel(f, (2,), (0.7,))
    Pd = np.array([[1.0], [0.5]])
    with prob.tangent_problem(2).at(np.concatenate([p, Pd.ravel()])) as ev:
        for y0 in (0.9, 0.2, 0.8):
            y, Y = np.array([y0, 1.0]), np.array([[1.0, 0.0], [0.3, -1.0]])
            got = ev.f(np.concatenate([y, Y.ravel()]), 0.0)
            np.testing.assert_allclose(got, _tangent_ref(prob, p, y, 0.0, Y, Pd), rtol=1e-13)
    # at each of the two flips both recordings (the function's, checked against,
    # and the Jacobian tape) record again
    assert prob.kernel.jtape is not None and prob.kernel.flipped == 4


def test_the_size_rule_chooses_the_reverse_pass():
    """Forward sensitivities while their n (n + P) number is small against
    FORWARD_WORK_MIN or the output intervals (and below FORWARD_WORK_MAX), the
    adjoint system beyond; a forced mode is kept."""
    small, _ = _kernel(lotka_volterra, (3,), (R, A3))       # 3 * 15 sensitivities
    assert problems.adjoint_mode(small, None, 2) == "forward"
    big, _ = _kernel(lambda y, t, k: -k * y, (20,), (0.7,))  # 20 * 21 = 420
    assert problems.adjoint_mode(big, False, 20) == "backsolve"
    assert problems.adjoint_mode(big, True, 20) == "checkpointed"
    assert problems.adjoint_mode(big, False, 43) == "forward"   # 420 <= 10 * 42
    assert problems.adjoint_mode(big, False, 42) == "backsolve"
    huge, _ = _kernel(lambda y, t, k: -k * y, (64,), (0.7,))  # 64 * 65 > 4000
    assert problems.adjoint_mode(huge, False, 10 ** 6) == "backsolve"
    big.settings = big.settings._replace(adjoint="forward")
    assert problems.adjoint_mode(big, False, 20) == "forward"


def test_a_large_problems_gradient_by_either_reverse_pass():
    """40 states, one rate: the adjoint under "auto", forward sensitivities
    when forced; both agree with the closed form y_i(T) = y0_i exp(-k c_i T)."""
    c = np.linspace(0.5, 1.5, 40)
    y0 = np.linspace(1.0, 2.0, 40)
    t = np.array([0.0, 0.5, 1.0])

    def loss(k, adjoint):
        ys = odeint(lambda y, t, k: -k * c * y, y0, t, k, adjoint=adjoint, **TIGHT)
        return tnp.sum(ys[-1])
    ref = np.sum(-c * 1.0 * y0 * np.exp(-0.8 * c))
    for adjoint in ("auto", "forward"):
        assert _rel(ta.grad(loss)(0.8, adjoint), ref) < 1e-9


def test_a_kernel_whose_branch_flips_records_again():
    def f(y, t, k):
        return -k * y if y[0] > 0.5 else -2.0 * k * y
    prob, p = _kernel(f, (2,), (0.7,))
    with prob.at(p) as ev:
        for y0 in (0.9, 0.2, 0.8):
            y = np.array([y0, 1.0])
            _, gy, gp = ev.vjp(y, 0.0, np.ones(2))
            k = 0.7 if y0 > 0.5 else 1.4
            np.testing.assert_allclose(gy, [-k, -k])
            np.testing.assert_allclose(gp, [-(k / 0.7) * y.sum()])
    assert prob.kernel.mode == "scalar" and prob.kernel.flipped == 2


def test_a_rhs_with_a_branch_differentiates_through_the_branch_taken():
    t = np.linspace(0.0, 2.0, 6)

    def loss(k):
        def f(y, t, k):
            return -k * y if t < 1.0 else -2.0 * k * y
        return tnp.sum(odeint(f, np.array([1.0]), t, k, hmax=0.05, **TIGHT))
    # the exact solution jumps its rate at t = 1; compare with its derivative
    k = 0.6

    def exact(k):
        y = np.where(t < 1.0, np.exp(-k * t), np.exp(-k) * np.exp(-2 * k * (t - 1.0)))
        return y.sum()
    assert _rel(ta.grad(loss)(k), _fd(exact, k, h=1e-4)) < 1e-5


# ---------------------------------------------------------------------------
# error paths
# ---------------------------------------------------------------------------

def test_bad_output_times():
    f = lambda y, t: -y                        # noqa: E731
    with pytest.raises(ValueError, match="strictly increasing.*t\\[1\\] = 2 is followed by 1"):
        odeint(f, 1.0, np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="strictly increasing"):
        odeint(f, 1.0, np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="1-d"):
        odeint(f, 1.0, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="1-d"):
        odeint(f, 1.0, np.array([]))
    with pytest.raises(ValueError, match="non-finite"):
        odeint(f, 1.0, np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="strictly increasing"):
        ta.grad(lambda t: tnp.sum(odeint(f, 1.0, t)))(np.array([1.0, 0.0]))


def test_bad_shapes_and_values():
    t = np.array([0.0, 1.0])
    with pytest.raises(ShapeError, match=r"shape \(3,\) for a state of shape \(2,\)"):
        odeint(lambda y, t: np.ones(3), np.ones(2), t)
    with pytest.raises(ShapeError, match=r"shape \(3,\) for a state of shape \(2,\)"):
        ta.grad(lambda k: tnp.sum(odeint(lambda y, t, k: k * np.ones(3), np.ones(2), t, k)))(1.0)
    with pytest.raises(TypeError, match="returned None"):
        odeint(lambda y, t: None, np.ones(2), t)
    with pytest.raises(TypeError, match="complex"):
        odeint(lambda y, t: -y, np.ones(2) + 1j, t)
    with pytest.raises(TypeError, match="complex"):
        odeint(lambda y, t: -1j * y, np.ones(2), t)
    with pytest.raises(TypeError, match="must be an array"):
        odeint(lambda y, t: y, {"a": 1.0}, t)
    with pytest.raises(TypeError, match="callable"):
        odeint("f", np.ones(2), t)
    with pytest.raises(ValueError, match="unknown method"):
        odeint(lambda y, t: -y, np.ones(2), t, method="Euler")
    with pytest.raises(ValueError, match="rtol"):
        odeint(lambda y, t: -y, np.ones(2), t, rtol=-1.0)
    with pytest.raises(ValueError, match="per-component atol"):
        odeint(lambda y, t: -y, np.ones(2), t, atol=np.array([1e-8, 1e-9]))
    with pytest.raises(ValueError, match="adjoint must be one of .*'forward'"):
        odeint(lambda y, t: -y, np.ones(2), t, adjoint="magic")
    with pytest.raises(TypeError, match="unsupported argument"):
        odeint(lambda y, t: -y, np.ones(2), t, Dfun=None)
    with pytest.raises(TypeError, match="either positionally"):
        odeint(lambda y, t, k: -k * y, np.ones(2), t, 1.0, args=(1.0,))


def test_an_integrator_that_stops_raises():
    with pytest.raises(RuntimeError, match="mxstep"):
        odeint(lambda y, t: np.array([1e3 * np.cos(1e3 * t)]), np.zeros(1),
               np.array([0.0, 100.0]), mxstep=5)
    with pytest.raises(RuntimeError, match="mxstep"):
        ta.grad(lambda k: tnp.sum(odeint(lambda y, t, k: k * np.cos(50.0 * t) * y, np.ones(1),
                                         np.array([0.0, 5.0]), k, mxstep=30)))(1.0)


def test_solve_ivp_errors_with_traced_inputs():
    f = lambda t, y, k: -k * y                 # noqa: E731
    y0 = np.ones(2)

    def call(**kw):
        return ta.grad(lambda k: tnp.sum(solve_ivp(f, (0.0, 1.0), y0, args=(k,), **kw).y))(1.0)
    with pytest.raises(ValueError, match="t_eval"):
        call()
    with pytest.raises(ValueError, match="dense_output"):
        call(t_eval=[1.0], dense_output=True)
    with pytest.raises(ValueError, match="events"):
        call(t_eval=[1.0], events=lambda t, y, k: y[0])
    with pytest.raises(ValueError, match="within t_span"):
        call(t_eval=[2.0])
    with pytest.raises(ValueError, match="sorted"):
        call(t_eval=[0.5, 0.2])
    with pytest.raises(ValueError, match="method"):
        call(t_eval=[1.0], method=scipy.integrate.RK45)
    with pytest.raises(ValueError, match="1-dimensional"):
        ta.grad(lambda k: tnp.sum(solve_ivp(f, (0.0, 1.0), np.ones((2, 2)), args=(k,),
                                            t_eval=[1.0]).y))(1.0)
