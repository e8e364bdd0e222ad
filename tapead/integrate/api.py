"""``odeint`` and ``solve_ivp``: scipy's calling conventions, differentiable.

Both check their arguments, collect the values to differentiate (the
initial state, the output times, the float leaves of ``args`` and the traced
values ``func`` closes over) into one primitive node (``rules.odeint_p``)
and give back scipy's result layout.  Nothing traced: scipy solves it and
nothing else runs.
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.integrate
from scipy.optimize import OptimizeResult

from tapead import _core
from tapead._core import Box
from tapead._prims.elementwise import astype
from tapead._tree import tree_flatten
from tapead import closures
from tapead.integrate.problems import IVP_METHODS, ODEINT, Settings, UserProblem
from tapead.integrate.rules import solve_node
from tapead.integrate import solvers
import tapead.numpy as tnp
from tapead.tree_util import leaf_shapes, pack_leaves

__all__ = ["odeint", "solve_ivp"]

_ADJOINTS = ("auto", "forward", "backsolve", "checkpointed")


def _is_float_leaf(x):
    if isinstance(x, Box):
        return True
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (float, np.floating)):
        return True
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return True
    if isinstance(x, (complex, np.complexfloating)) or (
            isinstance(x, np.ndarray) and x.dtype.kind == "c"):
        raise TypeError("odeint: args hold a complex value; derivatives need real "
                        "parameters (pass the real and imaginary parts separately)")
    return False


def _state(y0, name):
    """``y0`` as a float array (traced or not) and its dtype."""
    if isinstance(y0, dict) or (isinstance(y0, (list, tuple)) and any(
            isinstance(v, dict) for v in y0)):
        raise TypeError(f"{name}: y0 must be an array (or a float); got a "
                        f"{type(y0).__name__}. Pack a structured state into one array "
                        "(tapead.tree_util.tree_flatten) and unpack it inside func")
    if isinstance(y0, (list, tuple)):
        y0 = tnp.asarray(y0) if any(isinstance(v, Box) for v in tree_flatten(y0)[0]) \
            else np.asarray(y0)
    if isinstance(y0, Box):
        dtype = np.result_type(_core.lanes_of(y0))
    else:
        y0 = np.asarray(y0)
        dtype = y0.dtype
    if dtype.kind == "c":
        raise TypeError(f"{name}: y0 is complex; integrate the real and imaginary parts "
                        "as separate real components")
    if dtype.kind not in "fiub":
        raise TypeError(f"{name}: y0 must be a float array, got dtype {dtype}")
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
        y0 = y0.astype(np.float64) if not isinstance(y0, Box) else astype(y0, np.float64)
    return y0, dtype


def _times(t, name, what="t", strict=True):
    if isinstance(t, (list, tuple)) and any(isinstance(v, Box) for v in tree_flatten(t)[0]):
        t = tnp.asarray(t)
    tv = np.asarray(_core.concrete(t))
    if tv.ndim != 1 or tv.size == 0:
        raise ValueError(f"{name}: {what} must be a 1-d array of output times, got shape "
                         f"{tv.shape}")
    if tv.dtype.kind not in "fiu":
        raise TypeError(f"{name}: {what} must hold real numbers, got dtype {tv.dtype}")
    if not np.all(np.isfinite(tv)):
        raise ValueError(f"{name}: {what} holds a non-finite time")
    steps = np.diff(tv)
    if tv.size > 1 and not np.all(steps > 0 if strict else steps >= 0):
        k = int(np.argmax(~(steps > 0 if strict else steps >= 0)))
        raise ValueError(f"{name}: {what} must be strictly increasing; {what}[{k}] = "
                         f"{tv[k]:g} is followed by {tv[k + 1]:g}. Sort the output times "
                         "(and drop repeats)")
    if isinstance(t, Box):
        if np.result_type(_core.lanes_of(t)).kind != "f":
            t = astype(t, np.float64)
        return t
    return tv.astype(np.float64)


def _settings(name, method, rtol, atol, mxstep, hmax, max_step, options, adjoint):
    for v, what in ((rtol, "rtol"), (atol, "atol")):
        if np.ndim(v) != 0:
            raise ValueError(f"{name}: a per-component {what} is not supported (the "
                             "adjoint and tangent systems have other components); pass "
                             "one number")
        if not v >= 0:
            raise ValueError(f"{name}: {what} must be a non-negative number, got {v!r}")
    if adjoint not in _ADJOINTS:
        raise ValueError(f"{name}: adjoint must be one of {_ADJOINTS}, got {adjoint!r}")
    if not isinstance(mxstep, numbers.Integral) or mxstep < 0:
        raise ValueError(f"{name}: mxstep must be a non-negative int, got {mxstep!r}")
    if hmax:                           # odeint's bound on the step: every solve's max_step
        max_step = min(float(max_step), float(hmax))
    return Settings(method, float(rtol), float(atol), int(mxstep), float(hmax),
                    float(max_step), tuple(sorted(options.items())), adjoint)


def _integrate(name, func, y0, ts, args, settings, t_bound=None):
    """The solution ``(N,) + y0.shape`` of ``func(y, t, *args)`` (one node when
    anything is traced) and the solve's info (``nfev``, ``stiff``)."""
    if not callable(func):
        raise TypeError(f"{name}: the right-hand side must be callable, got "
                        f"{type(func).__name__}")
    y0, dtype = _state(y0, name)
    y_shape = tuple(_core.shape_of(y0)) if isinstance(y0, Box) else np.shape(y0)
    leaves, tree = tree_flatten(tuple(args))
    float_pos = [k for k, v in enumerate(leaves) if _is_float_leaf(v)]
    cells = closures.find(func)
    diff = [leaves[k] for k in float_pos] + list(cells.values)
    problem = UserProblem(func, y_shape, tree, leaves, float_pos, leaf_shapes(diff), cells,
                          settings, name="fun" if name == "solve_ivp" else "func")
    N = np.shape(_core.concrete(ts))[0]
    if not (isinstance(y0, Box) or isinstance(ts, Box) or
            any(isinstance(v, Box) for v in diff)):
        p = pack_leaves([np.asarray(v, dtype=np.float64) for v in diff])
        info = {}
        ys = solvers.solve(problem, np.asarray(y0, dtype=np.float64).reshape(-1), ts, p,
                           t_bound=t_bound, info=info)
        return ys.reshape((N,) + y_shape).astype(dtype, copy=False), info
    w = pack_leaves([y0] + diff)
    info = {}
    # an untraced y0 at untraced times: the reverse pass needs no cotangent of y0
    ys = solve_node(problem, w, ts, t_bound=t_bound, cache=info,
                    y0_fixed=not (isinstance(y0, Box) or isinstance(ts, Box)))
    ys = tnp.reshape(ys, (N,) + y_shape)
    if np.result_type(_core.lanes_of(ys)) != dtype:
        ys = astype(ys, dtype)
    return ys, info


def odeint(func, y0, t, *args, rtol=None, atol=None, mxstep=0, hmax=0.0, method="LSODA",
           adjoint="auto", **scipy_kwargs):
    """Integrate ``dy/dt = func(y, t, *args)``, differentiable.

    ``scipy.integrate.odeint``'s calling convention; the arguments to
    differentiate may be traced: the initial state ``y0``, the output times
    ``t``, the float leaves of ``args`` (arrays or pytrees of floats) and
    traced values that ``func`` closes over.  Reverse mode (``ta.grad``,
    ``ta.vjp``, ``ta.jacrev``) integrates, for a small problem, the forward
    sensitivities of every input with the state (one solve) and contracts
    them with the cotangent, else the adjoint system backwards between
    output times; forward mode (``ta.jvp``, ``ta.jacfwd``) integrates the
    forward sensitivities with the state; both compose for second
    derivatives (``ta.hessian``, ``ta.hvp``).

    Parameters
    ----------
    func : callable
        ``func(y, t, *args) -> dy/dt``, an array shaped like ``y``.  It is
        called with plain numpy values while scipy integrates; tapead
        records it once to get its derivatives.
    y0 : array
        The initial state at ``t[0]``, any shape.
    t : (N,) array
        Output times, strictly increasing; ``t[0]`` is the initial time.
    *args
        Extra arguments of ``func`` (scipy's ``args=`` tuple is accepted too).
        Float leaves are differentiable; other leaves (ints, strings,
        functions) are passed through.
    rtol, atol : float
        Relative and absolute tolerances (scipy's default 1.49012e-8); the
        backward solves use the same.
    mxstep : int
        LSODA's maximum number of steps per output interval (0: 500).
    hmax : float
        LSODA's largest step (0: no bound).
    method : str
        ``"LSODA"`` (``scipy.integrate.odeint``, the default) or a
        ``solve_ivp`` method: ``"RK45"``, ``"RK23"``, ``"DOP853"``, ``"BDF"``,
        ``"Radau"``.
    adjoint : str
        How reverse mode differentiates the solve: ``"forward"`` solves the
        state once more with the sensitivities ``dy(t_i)/d(y0, params)`` of
        all ``n + P`` inputs (``n`` states, ``P`` parameters) and contracts
        them with the cotangent (no backward solve; stable for stiff problems;
        its cost grows with ``n (n + P)``); ``"backsolve"`` integrates the
        adjoint system backwards between output times with the state (as
        JAX); ``"checkpointed"`` re-solves the state forwards from the stored
        output before (dense output) and integrates only the adjoint
        backwards, which stays stable for stiff problems.  ``"auto"``
        (default): ``"forward"`` for a small solve (``n (n + P)`` at most
        ``max(200, 10 (len(t) - 1))`` and at most 4000), else checkpointed for
        BDF and Radau and when LSODA found the problem stiff, else
        backsolve.

    Returns
    -------
    array
        ``(len(t),) + y0.shape``: the solution at the output times (``y0``'s
        dtype).

    Raises
    ------
    ValueError
        ``t`` not 1-d or not strictly increasing; a traced value that
        ``func`` uses but tapead cannot see (pass it through ``args``).
    ShapeError
        ``func`` returns an array not shaped like ``y0``.
    RuntimeError
        The integrator stopped (too many steps, step size too small).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.integrate import odeint
    >>> t = np.array([0.0, 1.0])
    >>> y = odeint(lambda y, t, k: -k * y, 2.0, t, 0.5, rtol=1e-10, atol=1e-10)
    >>> bool(np.isclose(y[1], 2.0 * np.exp(-0.5), rtol=1e-8))
    True
    >>> dk = ta.grad(lambda k: odeint(lambda y, t, k: -k * y, 2.0, t, k,
    ...                               rtol=1e-10, atol=1e-10)[1])(0.5)
    >>> bool(np.isclose(dk, -2.0 * np.exp(-0.5), rtol=1e-7))
    True
    """
    if "args" in scipy_kwargs:
        extra = scipy_kwargs.pop("args")
        if args:
            raise TypeError("odeint: pass the extra arguments either positionally "
                            "(odeint(func, y0, t, *args)) or as args=(...), not both")
        args = tuple(extra) if isinstance(extra, (tuple, list)) else (extra,)
    tfirst = scipy_kwargs.pop("tfirst", False)
    if scipy_kwargs:
        raise TypeError(f"odeint: unsupported argument(s) {sorted(scipy_kwargs)}; "
                        "supported: args, tfirst, rtol, atol, mxstep, hmax, method, adjoint")
    if method not in ("LSODA",) + IVP_METHODS:
        raise ValueError(f"odeint: unknown method {method!r}; use 'LSODA' (scipy's odeint) "
                         f"or one of {IVP_METHODS}")
    if tfirst:
        fn = func

        def func(y, t, *a):            # noqa: F811  (scipy's tfirst=True convention)
            return fn(t, y, *a)
    settings = _settings("odeint", ODEINT if method == "LSODA" else method,
                         1.49012e-8 if rtol is None else rtol,
                         1.49012e-8 if atol is None else atol, mxstep, hmax, np.inf, {},
                         adjoint)
    return _integrate("odeint", func, y0, _times(t, "odeint"), args, settings)[0]


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, *, adjoint="auto", **options):
    """``scipy.integrate.solve_ivp``, differentiable with respect to ``y0``,
    ``args``, the values ``fun`` closes over, ``t_eval`` and the start of
    ``t_span``.

    With nothing traced this is scipy's ``solve_ivp`` itself.  With traced
    inputs ``t_eval`` is required (the times whose states are
    differentiated) and ``dense_output``/``events``/``vectorized`` are refused;
    the derivatives come from the same adjoint and forward-sensitivity
    machinery as :func:`tapead.scipy.integrate.odeint`.

    Parameters
    ----------
    fun : callable
        ``fun(t, y, *args) -> dy/dt``, shape ``(n,)``.
    t_span : (t0, tf)
        The interval (``tf < t0`` integrates backwards).
    y0 : (n,) array
    method : str
        ``"RK45"`` (default), ``"RK23"``, ``"DOP853"``, ``"LSODA"``, ``"BDF"``,
        ``"Radau"``.
    t_eval : array
        Output times inside ``t_span``, sorted in its direction.
    args : tuple
        Extra arguments of ``fun``.
    adjoint : str
        As in :func:`tapead.scipy.integrate.odeint`; ``"auto"`` uses forward
        sensitivities for a small solve (the same rule), else checkpoints for
        LSODA, BDF and Radau.
    **options
        ``rtol`` (1e-3), ``atol`` (1e-6), ``max_step``, ``first_step``, ... as
        in scipy; the backward solves use the same ``rtol``, ``atol`` and
        ``max_step``.

    Returns
    -------
    OptimizeResult
        ``.t`` (the output times), ``.y`` ``(n, len(t_eval))``, ``.success``,
        ``.status``, ``.message``, ``.nfev``, as scipy's ``OdeResult``.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.integrate import solve_ivp
    >>> def final(y0):
    ...     sol = solve_ivp(lambda t, y: -y, (0.0, 1.0), y0, t_eval=[1.0],
    ...                     rtol=1e-10, atol=1e-12)
    ...     return sol.y[0, -1]
    >>> bool(np.isclose(ta.grad(final)(np.array([3.0])), np.exp(-1.0)))
    True
    """
    if args is not None and not isinstance(args, tuple):
        args = (args,)
    leaves = tree_flatten((y0, t_span, t_eval, args))[0]
    traced = any(isinstance(v, Box) for v in leaves) or bool(closures.find(fun))
    if not traced:
        return scipy.integrate.solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval,
                                         dense_output=dense_output, events=events,
                                         vectorized=vectorized, args=args, **options)
    if t_eval is None:
        raise ValueError("solve_ivp: derivatives need t_eval, the times at which the "
                         "solution is returned (the steps the solver happens to take are "
                         "not differentiable); pass t_eval=...")
    for flag, what in ((dense_output, "dense_output=True"), (events is not None, "events"),
                       (vectorized, "vectorized=True")):
        if flag:
            raise ValueError(f"solve_ivp: {what} is not supported with traced inputs; "
                             "use t_eval for the times you need")
    if not isinstance(method, str) or method not in IVP_METHODS:
        raise ValueError(f"solve_ivp: with traced inputs method must be one of "
                         f"{IVP_METHODS}, got {method!r}")
    if len(t_span) != 2:
        raise ValueError("solve_ivp: t_span must be a pair (t0, tf)")
    t0, tf = t_span
    t0v, tfv = float(_core.concrete(t0)), float(_core.concrete(tf))
    if t0v == tfv:
        raise ValueError("solve_ivp: t_span must have t0 != tf")
    direction = 1.0 if tfv > t0v else -1.0
    y0, _ = _state(y0, "solve_ivp")
    if len(_core.shape_of(y0) if isinstance(y0, Box) else np.shape(y0)) != 1:
        raise ValueError("solve_ivp: y0 must be 1-dimensional, shape (n,)")
    if isinstance(t_eval, (list, tuple)):
        t_eval = tnp.asarray(t_eval) if any(isinstance(v, Box) for v in t_eval) \
            else np.asarray(t_eval, dtype=np.float64)
    te = np.asarray(_core.concrete(t_eval), dtype=np.float64)
    if te.ndim != 1 or te.size == 0:
        raise ValueError("solve_ivp: t_eval must be a non-empty 1-d array")
    lo, hi = min(t0v, tfv), max(t0v, tfv)
    if np.any(te < lo) or np.any(te > hi):
        raise ValueError("solve_ivp: values in t_eval are not within t_span")
    if np.any(np.diff(te) * direction <= 0):
        raise ValueError("solve_ivp: t_eval must be strictly sorted in the direction of "
                         "t_span (increasing for t0 < tf, decreasing for t0 > tf)")
    rtol, atol = options.pop("rtol", 1e-3), options.pop("atol", 1e-6)
    max_step = options.pop("max_step", np.inf)
    settings = _settings("solve_ivp", method, rtol, atol, 0, 0.0, max_step, options,
                         adjoint)
    # the start t0 is the first time of the solve, t_eval the outputs after it (a
    # t_eval[0] equal to t0 is an output of its own: an interval of length zero)
    ts = tnp.concatenate([tnp.reshape(t0, (1,)), t_eval]) if _any_box(t0, t_eval) \
        else np.concatenate([[t0v], te])
    if direction > 0:
        def rhs(y, t, *a):
            return fun(t, y, *a)
        t_bound = tfv
    else:
        def rhs(y, s, *a):             # s = -t: dy/ds = -fun(-s, y)
            out = fun(-s, y, *a)
            return -(tnp.asarray(out) if isinstance(out, (list, tuple)) else out)
        ts, t_bound = -ts, -tfv
    ys, info = _integrate("solve_ivp", rhs, y0,
                          _times(ts, "solve_ivp", "t_eval", strict=False), args or (),
                          settings, t_bound=t_bound)
    y = tnp.transpose(ys[1:])
    return OptimizeResult(t=t_eval, y=y, sol=None, t_events=None, y_events=None,
                          nfev=info.get("nfev", 0), njev=0, nlu=0, status=0,
                          message="The solver successfully reached the end of the "
                                  "integration interval.", success=True)


def _any_box(*xs):
    return any(isinstance(x, Box) for x in xs)
