"""scipy's integrators, driven for the primal, adjoint and tangent solves.

Every solve runs on plain float64 vectors through a problem's evaluator
(``problems.Problem.at``): ``scipy.integrate.odeint`` (LSODA) or
``scipy.integrate.solve_ivp`` with the problem's method and tolerances.

The reverse pass integrates the adjoint system between consecutive output
times, last to first, one interval at a time (``adjoint_pass``, or one
interval per primitive node when the pass itself is being differentiated).
Only the forward solution at the output times is kept (the primal's output);
an interval either integrates the state back together with the adjoint
(``backsolve``) or re-solves it forward from the output before with dense
output and integrates only the adjoint back along it (``checkpointed``).
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.integrate

from tapead.integrate.problems import ODEINT

__all__ = ["solve", "sensitivities", "adjoint_interval", "adjoint_pass"]


class IntegrationError(RuntimeError):
    """scipy's integrator stopped before the end of the interval."""


def _odeint(fun, y0, ts, settings):
    """``scipy.integrate.odeint`` with ``fun(y, t)``; (ys, info)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.integrate.ODEintWarning)  # raised below
        ys, info = scipy.integrate.odeint(
            fun, y0, ts, rtol=settings.rtol, atol=settings.atol, mxstep=settings.mxstep,
            hmax=settings.hmax, full_output=True)
    if info["message"] != "Integration successful.":
        raise IntegrationError(
            f"odeint: scipy's LSODA stopped between t = {ts[0]:g} and t = {ts[-1]:g}: "
            f"{info['message']} Raise mxstep (now {settings.mxstep or 500} steps per "
            "output interval), loosen rtol/atol, or add output times")
    return ys, info


def _ivp(fun, t0, t1, y0, settings, t_eval=None, dense=False, first_step=None,
         method=None, primal=False):
    """``scipy.integrate.solve_ivp`` with ``fun(y, t)``."""
    opts = dict(settings.options) if primal else {}
    if settings.max_step != np.inf:
        opts["max_step"] = settings.max_step
    if first_step is not None and "first_step" not in opts:
        opts["first_step"] = min(first_step, abs(t1 - t0))
    method = method or (settings.method if settings.method != ODEINT else "LSODA")
    if primal:
        span, rhs = (t0, t1), (lambda t, y: fun(y, t))
    else:
        # in the time since t0: near t0 the steps may be far below the spacing of
        # floats around t0 (the fast initial layer of a stiff adjoint)
        span, rhs = (0.0, t1 - t0), (lambda tau, y: fun(y, t0 + tau))
    sol = scipy.integrate.solve_ivp(rhs, span, y0, method=method, t_eval=t_eval,
                                    dense_output=dense, rtol=settings.rtol,
                                    atol=settings.atol, **opts)
    if not sol.success:
        raise IntegrationError(f"solve_ivp ({method}) stopped between t = {t0:g} and "
                               f"t = {t1:g}: {sol.message} Loosen rtol/atol or check the "
                               "right-hand side")
    return sol


def solve(problem, y0, ts, p, t_bound=None, info=None):
    """The solution of ``problem`` at the times ``ts`` (strictly increasing):
    an ``(len(ts), n)`` float64 array.  ``info`` (a dict) receives whether
    LSODA found the problem stiff and the number of evaluations."""
    y0 = np.asarray(y0, dtype=np.float64)
    ts = np.asarray(ts, dtype=np.float64)
    if ts.size == 1:
        return y0[None].copy()
    if np.any(ts[1:] == ts[:-1]):          # repeated output times: solve at each once
        uniq, where = np.unique(ts, return_inverse=True)
        return solve(problem, y0, uniq, p, t_bound, info)[where]
    settings = problem.settings
    with problem.at(p) as ev:
        if settings.method == ODEINT:
            ys, out = _odeint(ev.f, y0, ts, settings)
            stiff = bool(np.any(out["mused"] == 2))
        else:
            t1 = ts[-1] if t_bound is None else float(t_bound)
            ys = _ivp(ev.f, ts[0], t1, y0, settings, t_eval=ts, primal=True).y.T
            stiff = None
        if info is not None:
            info["stiff"], info["nfev"] = stiff, ev.nfev
    return np.ascontiguousarray(ys)


def sensitivities(problem, y0, ts, p, Y0, Pd, t_bound=None):
    """The forward sensitivities ``(N, K, n)`` of ``problem``'s solution at
    ``ts`` for ``K`` initial tangents ``Y0`` (K, n) and parameter tangents
    ``Pd`` (K, P): one solve of the tangent system (``TangentProblem``)."""
    n, K = problem.n, Y0.shape[0]
    tan = problem.tangent_problem(K)
    u0 = np.concatenate([y0, np.ravel(Y0)])
    q = np.concatenate([p, np.ravel(Pd)])
    us = solve(tan, u0, ts, q, t_bound=t_bound)
    return us[:, n:].reshape(ts.size, K, n)


def adjoint_interval(ev, settings, z0, s0, s1, hint=None, steps=None):
    """One interval of the reverse pass: the adjoint state ``z = [y, lam, mu]``
    at reversed time ``s1`` from ``z0`` at ``s0`` (``ev``: the adjoint
    problem's evaluator).  With ``hint`` (the state at ``t = -s1``, the output
    before) the state is re-solved forward from it instead of backwards.
    ``steps`` (a dict shared by the intervals of one pass) keeps what the
    intervals share: the Fortran integrator, the last step size of the
    solve_ivp methods (the next interval's first step)."""
    steps = {} if steps is None else steps
    n = (z0.size - ev.p.size) // 2
    if hint is not None:
        return _checkpointed_interval(ev.base_at, settings, z0, s0, s1, hint, n)
    method = settings.method
    if method in _FORTRAN_RK:
        return _fortran_rk(_FORTRAN_RK[method], ev, z0, s0, s1, settings, steps)
    sol = _ivp(ev.f, s0, s1, z0, settings, first_step=steps.get("h"))
    if sol.t.size > 1:
        steps["h"] = float(abs(sol.t[-1] - sol.t[-2]))
    return sol.y[:, -1]


#: the explicit methods whose backward intervals run in Hairer's Fortran codes
#: (scipy.integrate.ode): the same Runge-Kutta pairs as solve_ivp's, without its
#: Python work per step; the reverse pass restarts at every output time, where
#: a one-step method loses nothing (LSODA restarts at order one).  LSODA's
#: non-stiff backward passes use DOP853 too.
_FORTRAN_RK = {ODEINT: "dop853", "DOP853": "dop853", "RK45": "dopri5"}
#: the backward intervals' step bound when mxstep is 0 (scipy's odeint bounds
#: only its own LSODA steps then, solve_ivp nothing)
_UNBOUNDED_STEPS = 10 ** 8


def _fortran_rk(name, ev, z0, s0, s1, settings, steps):
    """``z`` at ``s1`` from ``z0`` at ``s0`` by ``dop853``/``dopri5`` on the
    evaluator ``ev``; the integrator is made once per pass (kept in ``steps``)."""
    nsteps = settings.mxstep or _UNBOUNDED_STEPS
    held = steps.get("ode")
    if held is None or held[0] is not ev:
        state = {"s0": 0.0, "raised": []}
        fun = ev.f

        def rhs(tau, z):
            # scipy.integrate.ode replaces an exception raised here by its own
            # ValueError: keep it, stop the integrator with NaNs, raise it after
            if state["raised"]:
                return np.full(z.shape, np.nan)
            try:
                return fun(z, state["s0"] + tau)
            except Exception as e:     # noqa: BLE001  (re-raised below)
                state["raised"].append(e)
                return np.full(z.shape, np.nan)
        r = scipy.integrate.ode(rhs)
        r.set_integrator(name, rtol=settings.rtol, atol=settings.atol, nsteps=nsteps,
                         max_step=0.0 if settings.max_step == np.inf else settings.max_step)
        held = steps["ode"] = (ev, r, state)
    _, r, state = held
    state["s0"] = s0
    r.set_initial_value(z0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # a failure is raised below
        z1 = r.integrate(s1 - s0)
    if state["raised"]:
        raise state["raised"].pop()
    if not r.successful():
        raise IntegrationError(
            f"the backward solve ({name}) stopped between t = {-s0:g} and t = {-s1:g} "
            f"(status {r.get_return_code()}): raise mxstep (now {nsteps} steps per output "
            "interval) or loosen rtol/atol; pass adjoint='checkpointed' if the problem is "
            "stiff")
    return np.array(z1)


def _checkpointed_interval(base_at, settings, z0, s0, s1, y_start, n):
    """The state forward from ``y_start`` at ``t = -s1`` to ``t = -s0`` with
    dense output; then ``[lam, mu]`` back along it."""
    y_start = np.asarray(y_start, dtype=np.float64)
    t_lo, t_hi = -s1, -s0
    fw = _ivp(base_at.f, t_lo, t_hi, y_start, settings, dense=True)
    path = fw.sol                          # in the time since t_lo

    def back(v, s):
        _, gy, gp = base_at.vjp(path(-s - t_lo), -s, v[:n])
        return np.concatenate([gy, gp])
    bw = _ivp(back, s0, s1, z0[n:], settings)
    return np.concatenate([y_start, bw.y[:, -1]])


def adjoint_pass(problem, g, ys, ts, p, mode):
    """The reverse pass on plain values: the cotangents ``(lam0, mu)`` of the
    initial state and of the parameters, for the cotangent ``g`` (N, n) of
    the solution ``ys`` (N, n) at ``ts``."""
    adj = problem.adjoint_problem()
    n, N = problem.n, ts.size
    lam, mu = np.array(g[N - 1], dtype=np.float64), np.zeros(problem.p)
    steps = {}
    with adj.at(p) as ev:
        for i in range(N - 1, 0, -1):
            if ts[i] == ts[i - 1]:             # an interval of length zero
                lam = lam + g[i - 1]
                continue
            z0 = np.concatenate([ys[i], lam, mu])
            z1 = adjoint_interval(ev, problem.settings, z0, -ts[i], -ts[i - 1],
                                  hint=ys[i - 1] if mode == "checkpointed" else None,
                                  steps=steps)
            lam = z1[n:2 * n] + g[i - 1]
            mu = z1[2 * n:]
    return lam, mu
