"""The ``odeint`` primitive: an ODE solve as one tape node, with its rules.

``odeint_p(w, ts)`` with ``w = [y0, p]`` (the flat initial state and the
flat parameters) and ``ts`` (N,) the output times, strictly increasing; its
value is the solution at those times, ``(N, n)``.  The problem (the
right-hand side, its shapes, the integrator and tolerances) is a parameter.

* **VJP** (reverse mode), for a small problem (the size rule of
  ``problems.adjoint_mode``, or ``adjoint="forward"``): forward
  sensitivities.  One solve of the tangent system with the ``n + P`` unit
  directions gives ``S(t_i) = dy(t_i)/dw`` at every output time, and the
  cotangent of ``w`` is ``sum_i g_i^T S(t_i)`` (the sensitivities are kept
  for the node's further cotangents, as ``jacrev`` pulls back).  On traced
  values the tangent solve is an ``odeint_p`` node of its own, so second
  derivatives differentiate it again.
* **VJP** otherwise: the adjoint method.  From the last output time to
  the first, the adjoint system of the problem (``AdjointProblem``) is
  integrated over each interval and the cotangent of the next output is
  added at each output time; the result is the cotangent of ``y0`` and the
  accumulated cotangent of ``p``.  The cotangent of an output time ``t_i`` is
  ``g_i . f(y_i, t_i)`` (for ``t_0``: ``-lam_0 . f(y0, t0)``).  On plain
  values the pass runs in ``solvers.adjoint_pass``; on traced values (the
  pass itself differentiated: Hessians, Hessian-vector products) each
  interval is an ``odeint_p`` node of the adjoint problem, so the same rules
  apply to it again.
* **JVP** (forward mode): forward sensitivities, the problem solved with its
  tangent system (``TangentProblem``); ``defbatched`` carries the K
  directions of ``jacfwd`` through one solve.
* **vmap**: once per lane (the right-hand side is user code).
* **sparsity**: dense (user code).
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box
from tapead import patterns
from tapead._prims.base import PER_LANE, Primitive
from tapead.errors import NonDifferentiableError
from tapead.integrate import solvers
from tapead.integrate.problems import adjoint_mode
import tapead.numpy as tnp

__all__ = ["odeint_p", "solve_node"]

_CHECKPOINTED_AGAIN = (
    "odeint: a second derivative through the reverse pass of a stiff solve is not "
    "supported: that pass re-solves the state forward from the checkpoints "
    "(adjoint='checkpointed', the default for LSODA when it finds the problem stiff, "
    "BDF and Radau), and integrating a stiff state backwards instead would give wrong "
    "numbers. Use forward mode over forward mode (ta.jacfwd(ta.jacfwd(f))), which "
    "integrates the second-order sensitivities forwards, or pass adjoint='backsolve' "
    "for a problem that is not stiff")


def _any_box(*xs):
    return any(isinstance(x, Box) for x in xs)


def _impl(w, ts, *, problem, cache, t_bound=None, hint=None, steps=None, y0_fixed=False):
    dtype = np.result_type(w)
    w = np.asarray(w, dtype=np.float64)
    ts = np.asarray(ts, dtype=np.float64)
    n = problem.n
    if hint is not None:                   # one interval of a checkpointed reverse pass
        with problem.at(w[n:]) as ev:
            z1 = solvers.adjoint_interval(ev, problem.settings, w[:n], ts[0], ts[1],
                                          hint=hint)
        ys = np.stack([w[:n], z1])
    elif steps is not None:                # one interval of a backsolve reverse pass
        with problem.at(w[n:]) as ev:
            z1 = solvers.adjoint_interval(ev, problem.settings, w[:n], ts[0], ts[1],
                                          steps=steps)
        ys = np.stack([w[:n], z1])
        cache["stiff"] = False             # a backsolve is chosen for non-stiff problems
    else:
        ys = solvers.solve(problem, w[:n], ts, w[n:], t_bound=t_bound, info=cache)
    return ys.astype(dtype, copy=False) if dtype != np.float64 else ys


def solve_node(problem, w, ts, **params):
    """The solution of ``problem`` from ``w = [y0, p]`` at ``ts``: an
    ``odeint_p`` node when anything is traced, the solve itself otherwise."""
    params.setdefault("cache", {})
    if _any_box(w, ts):
        return _core.bind(odeint_p, w, ts, problem=problem, **params)
    return _impl(w, ts, problem=problem, **params)


# ---------------------------------------------------------------------------
# reverse mode: the adjoint method
# ---------------------------------------------------------------------------

def _vjp(k, g, ans, w, ts, *, problem, cache, t_bound=None, hint=None, steps=None,
         y0_fixed=False):
    if hint is not None:
        raise NonDifferentiableError(_CHECKPOINTED_AGAIN)
    if cache.get("key") != id(g):
        cache["adjoint"] = _adjoint(problem, g, ans, w, ts, cache, t_bound, y0_fixed)
        cache["key"], cache["g"] = id(g), g         # g kept alive: its id stays unique
        cache.pop("t_ct", None)
    lam, mu = cache["adjoint"]
    if k == 0:
        ct = tnp.concatenate([lam, mu])
        return ct if isinstance(ct, Box) else ct.astype(np.result_type(w), copy=False)
    if "t_ct" not in cache:
        cache["t_ct"] = _time_cotangent(problem, g, ans, w, ts, lam)
    return cache["t_ct"]


def _adjoint(problem, g, ans, w, ts, cache, t_bound=None, y0_fixed=False):
    """``(lam0, mu)``: the cotangents of ``y0`` and of ``p`` (``y0_fixed``:
    neither ``y0`` nor the times are traced, so ``lam0`` goes nowhere)."""
    n, N = problem.n, np.shape(_core.concrete(ts))[0]
    mode = adjoint_mode(problem, cache.get("stiff"), N)
    if mode == "forward":
        return _forward_cotangents(problem, g, w, ts, cache, t_bound, y0_fixed)
    if not _any_box(g, ans, w, ts):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        return solvers.adjoint_pass(problem, g, np.asarray(ans, dtype=np.float64),
                                    np.asarray(ts, dtype=np.float64), w[n:], mode)
    adj = problem.adjoint_problem()
    p = w[n:]
    lam, mu = g[N - 1], np.zeros(problem.p)
    steps = {}
    tv = np.asarray(_core.concrete(ts))
    for i in range(N - 1, 0, -1):
        if tv[i] == tv[i - 1]:                 # an interval of length zero
            lam = lam + g[i - 1]
            continue
        z0 = tnp.concatenate([ans[i], lam, mu])
        pair = tnp.stack([-ts[i], -ts[i - 1]])
        if mode == "checkpointed":
            zs = solve_node(adj, tnp.concatenate([z0, p]), pair,
                            hint=np.asarray(_core.concrete(ans[i - 1]), dtype=np.float64))
        else:
            zs = solve_node(adj, tnp.concatenate([z0, p]), pair, steps=steps)
        z1 = zs[1]
        lam = z1[n:2 * n] + g[i - 1]
        mu = z1[2 * n:]
    return lam, mu


def _forward_cotangents(problem, g, w, ts, cache, t_bound, y0_fixed=False):
    """``(lam0, mu)`` from forward sensitivities: ``S(t_i) = dy(t_i)/dw`` for
    all ``n + P`` inputs ``w = [y0, p]`` (only the ``P`` parameters when
    ``y0_fixed``; ``lam0`` is zero then) in one solve of the tangent system,
    then ``ct = sum_i g_i^T S(t_i)``.  On plain values the sensitivities are
    kept in the node's cache (a ``jacrev`` pulls back several cotangents)."""
    n, P = problem.n, problem.p
    N = np.shape(_core.concrete(ts))[0]
    m = 0 if y0_fixed else n       # the directions of y0
    K = m + P                      # S(t_i)[k] = dy(t_i)/dw_k
    Y0, Pd = np.eye(K, n) * (m > 0), np.eye(K, P, -m)    # unit directions: y0, then p
    if not _any_box(g, w, ts):
        w = np.asarray(w, dtype=np.float64)
        ts = np.asarray(ts, dtype=np.float64)
        held = cache.get("sens")           # (w, ts, S): a replayed node has other values
        if held is not None and np.array_equal(held[0], w) and np.array_equal(held[1], ts):
            sens = held[2]
        else:
            sens = solvers.sensitivities(problem, w[:n], ts, w[n:], Y0, Pd, t_bound)
            cache["sens"] = (w.copy(), ts.copy(), sens)
        ct = np.einsum("ikj,ij->k", sens, np.asarray(g, dtype=np.float64))
    else:
        sens = _tangent_solve(problem, w, ts, Y0, Pd, t_bound)          # (K, N, n)
        ct = tnp.sum(sens * tnp.reshape(g, (1, N, n)), axis=(1, 2))
    if y0_fixed:
        return np.zeros(n), ct
    return ct[:n], ct[n:]


def _rhs_rows(problem, ys, ts, p, rows):
    """``f(ys[i], ts[i])`` for ``i`` in ``rows``, stacked (traced or plain)."""
    if not _any_box(ys, ts, p):
        ys, ts = np.asarray(ys, dtype=np.float64), np.asarray(ts, dtype=np.float64)
        with problem.at(np.asarray(p, dtype=np.float64)) as ev:
            return np.stack([np.array(ev.f(ys[i], ts[i]), dtype=np.float64) for i in rows])
    return tnp.stack([problem.rhs(ys[i], ts[i], p) for i in rows])


def _time_cotangent(problem, g, ans, w, ts, lam0):
    """The cotangent of the output times: ``g_i . f(y_i, t_i)`` for ``i >= 1``,
    ``-(lam_0 - g_0) . f(y_0, t_0)`` for ``t_0`` (moving the start shifts
    every later output by ``-Phi f(y0, t0) dt0``)."""
    n, N = problem.n, np.shape(_core.concrete(ts))[0]
    p = w[n:]
    F = _rhs_rows(problem, ans, ts, p, range(N))
    F0 = _rhs_rows(problem, tnp.reshape(w[:n], (1, n)), ts[:1], p, [0])[0]
    later = tnp.sum(F[1:] * g[1:], axis=1)
    first = -tnp.sum(F0 * (lam0 - g[0]))
    ct = tnp.concatenate([tnp.reshape(first, (1,)), later])
    return ct if isinstance(ct, Box) else np.asarray(ct, dtype=np.result_type(ts))


# ---------------------------------------------------------------------------
# forward mode: forward sensitivities
# ---------------------------------------------------------------------------

def _tangent_solve(problem, w, ts, Y0, Pd, t_bound):
    """The tangents ``(K, N, n)`` of the solution for initial tangents ``Y0``
    (K, n) and parameter tangents ``Pd`` (K, P)."""
    n, N, K = problem.n, np.shape(_core.concrete(ts))[0], np.shape(_core.concrete(Y0))[0]
    tan = problem.tangent_problem(K)
    w_tan = tnp.concatenate([w[:n], tnp.reshape(Y0, (-1,)), w[n:], tnp.reshape(Pd, (-1,))])
    us = solve_node(tan, w_tan, ts, t_bound=t_bound)
    return tnp.moveaxis(tnp.reshape(us[:, n:], (N, K, n)), 1, 0)


def _is_zero(x):
    return x is None or (not isinstance(x, Box) and not np.any(x))


def _tangents(problem, ans, w, ts, tw, tts, K, t_bound):
    """The solution's tangents ``(K, N, n)`` for the tangents ``tw`` (K, n + P)
    of ``w`` and ``tts`` (K, N) of ``ts`` (None: zero)."""
    n, P, N = problem.n, problem.p, np.shape(_core.concrete(ts))[0]
    if _is_zero(tw) and _is_zero(tts):
        return None
    Y0 = tw[:, :n] if tw is not None else np.zeros((K, n))
    Pd = tw[:, n:] if tw is not None else np.zeros((K, P))
    out = None
    if tts is not None and not _is_zero(tts):
        p = w[n:]
        F = _rhs_rows(problem, ans, ts, p, range(N))                    # (N, n)
        out = tnp.reshape(tts, (K, N, 1)) * tnp.reshape(F, (1, N, n))
        if not _is_zero(tts[:, 0]):
            F0 = _rhs_rows(problem, tnp.reshape(w[:n], (1, n)), ts[:1], p, [0])  # (1, n)
            Y0 = Y0 - tnp.reshape(tts[:, 0], (K, 1)) * F0
    if not (_is_zero(Y0) and _is_zero(Pd)):
        sens = _tangent_solve(problem, w, ts, Y0, Pd, t_bound)
        out = sens if out is None else out + sens
    if out is None:
        return None
    return out if isinstance(out, Box) else np.asarray(out, dtype=np.result_type(ans))


def _jvp(k, t, ans, w, ts, *, problem, cache, t_bound=None, hint=None, steps=None,
         y0_fixed=False):
    if hint is not None:
        raise NonDifferentiableError(_CHECKPOINTED_AGAIN)
    if k == 0:
        out = _tangents(problem, ans, w, ts, tnp.reshape(t, (1, -1)), None, 1, t_bound)
    else:
        out = _tangents(problem, ans, w, ts, None, tnp.reshape(t, (1, -1)), 1, t_bound)
    return None if out is None else out[0]


def _batched_jvp(tans, ans, vals, params, K):
    if params.get("hint") is not None:
        raise NonDifferentiableError(_CHECKPOINTED_AGAIN)
    w, ts = vals
    return _tangents(params["problem"], ans, w, ts, tans[0], tans[1], K,
                     params.get("t_bound"))


odeint_p = Primitive("odeint", _impl)
odeint_p.defvjp_any(_vjp)
odeint_p.defjvp_any(_jvp)
odeint_p.defbatched(_batched_jvp)
odeint_p.defvmap(PER_LANE)             # the right-hand side is user code: once per lane
odeint_p.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)
