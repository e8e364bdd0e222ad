"""The ODE problems the ``odeint`` primitive solves, on flat vectors.

A problem is ``y' = rhs(y, t, p)`` with a flat state ``y`` of ``n`` numbers
and a flat parameter vector ``p`` of ``P`` numbers.  There are three kinds:

* ``UserProblem``: the user's ``func(y, t, *args)``; ``p`` packs the float
  leaves of ``args`` and the traced values found in ``func``'s closure;
* ``AdjointProblem(base)``: the adjoint system of ``base`` in reversed time
  ``s = -t``, state ``z = [y, lam, mu]`` (``2n + P``)::

      dy/ds = -f(y, -s, p),   dlam/ds = lam^T df/dy,   dmu/ds = lam^T df/dp

  (integrated from an output time back to the one before, it carries the
  cotangent ``lam`` of the state back and accumulates the parameters'
  cotangent ``mu``);
* ``TangentProblem(base, K)``: ``base`` with ``K`` tangent directions (forward
  sensitivities), state ``[y, Y]`` (``n (1 + K)``), parameters ``[p, Pdot]``::

      dy/dt = f,   dY_k/dt = df/dy Y_k + df/dp Pdot_k.

Every ``rhs`` is written with tapead operations (``ta.vjp``, ``ta.jvp`` of the
base's ``rhs``), so the rules of a derived problem's solve differentiate
again: that is how second derivatives go through.  ``problem.at(p)`` is the
evaluator scipy's integrators call: plain numpy values, the user's function
run directly, its derivatives from a recorded tape (``kernels.RhsKernel``).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from tapead._core import Box
from tapead._tree import tree_unflatten
from tapead.integrate.kernels import RhsKernel, as_state_vector, rhs_vjp
import tapead.numpy as tnp
from tapead.transforms import jacfwd, jvp, vjp
from tapead.tree_util import unpack_leaves

__all__ = ["Settings", "Problem", "UserProblem", "AdjointProblem", "TangentProblem"]

#: scipy's LSODA through ``scipy.integrate.odeint``
ODEINT = "odeint"
IVP_METHODS = ("RK45", "RK23", "DOP853", "LSODA", "BDF", "Radau")
STIFF_METHODS = ("LSODA", "BDF", "Radau")


class Settings(NamedTuple):
    """How a problem (and every problem derived from it) is integrated."""
    method: str                 # ODEINT or a solve_ivp method name
    rtol: float
    atol: float
    mxstep: int                 # scipy.integrate.odeint's mxstep (0: its default, 500)
    hmax: float                 # scipy.integrate.odeint's hmax (0: no bound)
    max_step: float             # the largest step of every solve (inf: no bound)
    options: tuple              # further solve_ivp options of the primal solve, (name, value)
    adjoint: str                # "auto", "forward", "backsolve" or "checkpointed"


class Problem:
    """``y' = rhs(y, t, p)``: ``n`` states, ``p`` parameters, ``settings``."""

    n: int
    p: int
    settings: Settings

    def rhs(self, y, t, p):
        """dy/dt as a flat ``(n,)`` vector, with tapead operations."""
        raise NotImplementedError

    def at(self, p) -> "Evaluator":
        """The evaluator at plain parameters ``p`` (a context manager)."""
        return Evaluator(self, p)

    def adjoint_problem(self) -> "AdjointProblem":
        cached = self.__dict__.get("_adjoint")
        if cached is None:
            cached = self._adjoint = AdjointProblem(self)
        return cached

    def tangent_problem(self, K: int) -> "TangentProblem":
        cache = self.__dict__.setdefault("_tangents", {})
        if K not in cache:
            cache[K] = TangentProblem(self, K)
        return cache[K]


class Evaluator:
    """A problem at plain parameters, for scipy's integrators: ``f(y, t)``,
    ``vjp(y, t, lam) -> (f, gy, gp)`` and ``jvp(y, t, Y, Pdot) -> (f, T)`` on
    float64 vectors (``Y``: ``(K, n)``, ``Pdot``: ``(K, P)``, ``T``: ``(K, n)``).
    This generic one runs tapead's transforms on ``rhs`` at each call."""

    def __init__(self, problem, p):
        self.problem, self.p = problem, np.asarray(p, dtype=np.float64)
        self.nfev = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def f(self, y, t):
        self.nfev += 1
        return np.asarray(self.problem.rhs(y, t, self.p), dtype=np.float64)

    def vjp(self, y, t, lam):
        rhs, p = self.problem.rhs, self.p
        if p.size:
            out, pull = vjp(lambda y_, p_: rhs(y_, t, p_), y, p)
            gy, gp = pull(lam)
        else:
            out, pull = vjp(lambda y_: rhs(y_, t, p), y)
            (gy,), gp = pull(lam), np.zeros(0)
        return (np.asarray(out, dtype=np.float64), np.asarray(gy, dtype=np.float64),
                np.asarray(gp, dtype=np.float64))

    def jvp(self, y, t, Y, Pdot):
        K, n, P = Y.shape[0], y.size, self.p.size
        if K >= n + P:                     # the Jacobian costs no more directions
            f, Jy, Jp = self.jacobian(y, t)
            return f, Y @ Jy.T + Pdot @ Jp.T
        # the K directions at once: one recording, one K-direction forward sweep
        rhs, p = self.problem.rhs, self.p
        f = np.asarray(rhs(y, t, p), dtype=np.float64)
        T = jacfwd(lambda c: rhs(y + c @ Y, t, p + c @ Pdot))(np.zeros(K))
        return f, np.asarray(T, dtype=np.float64).reshape(n, K).T

    def jacobian(self, y, t):
        rhs, p = self.problem.rhs, self.p
        f = np.asarray(rhs(y, t, p), dtype=np.float64)
        if p.size:
            Jy, Jp = jacfwd(lambda y_, p_: rhs(y_, t, p_), argnums=(0, 1))(y, p)
        else:
            Jy, Jp = jacfwd(lambda y_: rhs(y_, t, p))(y), np.zeros((f.size, 0))
        return f, np.asarray(Jy, dtype=np.float64), np.asarray(Jp, dtype=np.float64)


# ---------------------------------------------------------------------------
# the user's problem
# ---------------------------------------------------------------------------

class UserProblem(Problem):
    """The user's ``func(y, t, *args)`` on flat vectors.

    Parameters
    ----------
    func : callable
        ``func(y, t, *args) -> dy/dt`` shaped like ``y``.
    y_shape : tuple
        The state's shape.
    arg_tree : TreeDef
        Structure of ``args`` (a tuple).
    arg_leaves : list
        The leaves of ``args``; the float leaves (positions ``float_pos``) are
        replaced by the parameters at each call, the others passed as they are.
    float_pos : list of int
        Positions of the float leaves in ``arg_leaves``.
    p_shapes : list of tuple
        Shapes of the float leaves, then of the closure's traced values.
    cells : Closure
        The traced values ``func`` closes over (a ``tapead.closures.Closure``).
    settings : Settings
    """

    def __init__(self, func, y_shape, arg_tree, arg_leaves, float_pos, p_shapes, cells,
                 settings, name="func"):
        self.func, self.y_shape = func, tuple(y_shape)
        self.arg_tree, self.arg_leaves, self.float_pos = arg_tree, list(arg_leaves), float_pos
        self.p_shapes, self.cells, self.settings = [tuple(s) for s in p_shapes], cells, settings
        self.name = name
        self.n = int(np.prod(self.y_shape, dtype=np.int64))
        self.p = int(sum(int(np.prod(s, dtype=np.int64)) for s in self.p_shapes))
        self.kernel = RhsKernel(self.call, self.rhs, self.y_shape, self.p_shapes)

    def call(self, y, t, leaves):
        """``func`` at state ``y`` (shaped), time ``t``, parameter leaves ``leaves``."""
        args = list(self.arg_leaves)
        for k, v in zip(self.float_pos, leaves):
            args[k] = v
        args = tree_unflatten(self.arg_tree, args)
        closure = leaves[len(self.float_pos):]
        if self.cells:
            with self.cells.swapped(closure):
                return self.func(y, t, *args)
        return self.func(y, t, *args)

    def rhs(self, y, t, p):
        y = tnp.reshape(y, self.y_shape) if isinstance(y, Box) else np.reshape(y, self.y_shape)
        if isinstance(p, Box):
            leaves = unpack_leaves(p, self.p_shapes)
        else:
            leaves = _plain_leaves(np.asarray(p), self.p_shapes)
        return as_state_vector(self.call(y, t, leaves), self.y_shape, self.n, self.name)

    def at(self, p):
        return UserEvaluator(self, p)


def _plain_leaves(p, shapes):
    """``p`` cut into leaves of ``shapes``; 0-d leaves as Python floats."""
    out, off = [], 0
    for s in shapes:
        m = int(np.prod(s, dtype=np.int64))
        out.append(float(p[off]) if s == () else p[off:off + m].reshape(s))
        off += m
    return out


class UserEvaluator(Evaluator):
    """The user's function at plain parameters: called directly for ``f``,
    differentiated through its recorded tape (``RhsKernel``).  While active
    it holds the plain closure values in ``func``'s closure cells."""

    def __init__(self, problem, p):
        super().__init__(problem, p)
        prob = problem
        self.leaves = _plain_leaves(self.p, prob.p_shapes)
        args = list(prob.arg_leaves)
        for k, v in zip(prob.float_pos, self.leaves):
            args[k] = v
        self.args = tree_unflatten(prob.arg_tree, args)
        self._swap = None
        self.p_list = None

    def __enter__(self):
        prob = self.problem
        if prob.cells:
            self._swap = prob.cells.swapped(self.leaves[len(prob.float_pos):])
            self._swap.__enter__()
        return self

    def __exit__(self, *exc):
        if self._swap is not None:
            self._swap.__exit__(*exc)
            self._swap = None
        return False

    def f(self, y, t):
        self.nfev += 1
        prob = self.problem
        out = prob.func(y.reshape(prob.y_shape) if prob.y_shape != (prob.n,) else y, t,
                        *self.args)
        if type(out) is np.ndarray and out.dtype == np.float64 and out.shape == prob.y_shape:
            return out.reshape(prob.n)
        return self._check(out)

    def _check(self, out):
        prob = self.problem
        if isinstance(out, Box) or (type(out) is np.ndarray and out.dtype == object) or (
                isinstance(out, (list, tuple)) and any(isinstance(v, Box) for v in out)):
            raise ValueError(
                f"odeint: {prob.name}'s result depends on a traced value that tapead "
                "cannot see (it is not in args, nor in the closure cells of the function "
                "and of the functions it holds; e.g. an attribute of an object, a global, "
                "a functools.partial). Pass it through args: "
                "odeint(func, y0, t, theta) with func(y, t, theta)")
        return as_state_vector(out, prob.y_shape, prob.n, prob.name)

    def vjp(self, y, t, lam):
        return self.problem.kernel.vjp(y, t, self.p, lam)

    def adjoint_rhs(self, z, t):
        """The adjoint system's right-hand side ``[-f, gy, gp]`` at ``z = [y, lam, mu]``."""
        if self.p_list is None:
            self.p_list = self.p.tolist()
        return self.problem.kernel.adjoint_rhs(z, t, self.p, self.p_list)

    def jvp(self, y, t, Y, Pdot):
        return self.problem.kernel.jvp(y, t, self.p, Y, Pdot)

    def jacobian(self, y, t):
        return self.problem.kernel.jacobian(y, t, self.p)


# ---------------------------------------------------------------------------
# derived problems
# ---------------------------------------------------------------------------

class AdjointProblem(Problem):
    """The adjoint system of ``base`` in reversed time (see the module's doc)."""

    def __init__(self, base: Problem):
        self.base, self.settings = base, base.settings
        self.n, self.p = 2 * base.n + base.p, base.p

    def rhs(self, z, s, p):
        nb, base = self.base.n, self.base
        y, lam = z[:nb], z[nb:2 * nb]
        t = -s
        out, gy, gp = rhs_vjp(base.rhs, y, t, p, lam, self.p)
        return tnp.concatenate([-out, gy, gp])

    def at(self, p):
        return AdjointEvaluator(self, p)


class AdjointEvaluator(Evaluator):
    """The adjoint system at plain values from its base's ``vjp``."""

    def __init__(self, problem, p):
        super().__init__(problem, p)
        self.base_at = problem.base.at(p)

    def __enter__(self):
        self.base_at.__enter__()
        return self

    def __exit__(self, *exc):
        return self.base_at.__exit__(*exc)

    def f(self, z, s):
        self.nfev += 1
        base_at = self.base_at
        if type(base_at) is UserEvaluator:
            return base_at.adjoint_rhs(z, -s)
        nb = self.problem.base.n
        f, gy, gp = base_at.vjp(z[:nb], -s, z[nb:2 * nb])
        return np.concatenate([-f, gy, gp])


class TangentProblem(Problem):
    """``base`` with ``K`` tangent directions (see the module's doc)."""

    def __init__(self, base: Problem, K: int):
        self.base, self.K, self.settings = base, int(K), base.settings
        self.n, self.p = base.n * (1 + self.K), base.p * (1 + self.K)

    def split(self, u, q):
        nb, pb, K = self.base.n, self.base.p, self.K
        reshape = tnp.reshape if isinstance(u, Box) or isinstance(q, Box) else np.reshape
        return (u[:nb], reshape(u[nb:], (K, nb)), q[:pb], reshape(q[pb:], (K, pb)))

    def rhs(self, u, t, q):
        y, Y, p, Pd = self.split(u, q)
        base = self.base
        out = base.rhs(y, t, p)
        if self.K == 1:
            if base.p:
                tan = jvp(lambda y_, p_: base.rhs(y_, t, p_), (y, p), (Y[0], Pd[0]))[1]
            else:
                tan = jvp(lambda y_: base.rhs(y_, t, p), (y,), (Y[0],))[1]
            return tnp.concatenate([out, tan])
        # K directions at once: d/dc rhs(y + c Y, p + c Pd) at c = 0, (n, K)
        T = jacfwd(lambda c: base.rhs(y + c @ Y, t, p + c @ Pd))(np.zeros(self.K))
        return tnp.concatenate([out, tnp.reshape(tnp.transpose(T), (-1,))])

    def at(self, q):
        return TangentEvaluator(self, q)


class TangentEvaluator(Evaluator):
    """The tangent system at plain values from its base's ``jvp`` (for the
    user's function: its kernel's ``tangent_fun``, one replay and one sweep
    per call)."""

    def __init__(self, problem, q):
        super().__init__(problem, q)
        self.base_at = problem.base.at(self.p[:problem.base.p])
        self.Pd = self.p[problem.base.p:].reshape(problem.K, problem.base.p)
        self.fast = None

    def __enter__(self):
        self.base_at.__enter__()
        return self

    def __exit__(self, *exc):
        return self.base_at.__exit__(*exc)

    def f(self, u, t):
        self.nfev += 1
        fast = self.fast
        if fast is not None:
            return fast(u, t)
        base_at = self.base_at
        if type(base_at) is UserEvaluator:
            self.fast = base_at.problem.kernel.tangent_fun(base_at.p, self.Pd)
            return self.fast(u, t)
        nb, K = self.problem.base.n, self.problem.K
        f, T = base_at.jvp(u[:nb], t, u[nb:].reshape(K, nb), self.Pd)
        return np.concatenate([f, T.ravel()])


#: the size rule of ``adjoint="auto"``: reverse mode integrates forward
#: sensitivities when the tangent system's ``n (n + P)`` sensitivities number
#: at most ``max(FORWARD_WORK_MIN, FORWARD_WORK_PER_INTERVAL * (N - 1))`` and
#: at most ``FORWARD_WORK_MAX`` (``n`` states, ``P`` parameters, ``N`` output
#: times).  The tangent system's cost grows with ``n (n + P)``, the adjoint
#: pass's with the ``N - 1`` intervals it restarts at; measured on generalized
#: Lotka-Volterra fits at rtol = atol = 1e-10 (n = 3 .. 20, P = n .. n + n**2,
#: N = 20 and 200), the sensitivities were faster up to about these bounds.
FORWARD_WORK_MIN = 200
FORWARD_WORK_PER_INTERVAL = 10
FORWARD_WORK_MAX = 4000


def adjoint_mode(problem: Problem, stiff: Optional[bool], n_out: int) -> str:
    """How reverse mode differentiates a solve of ``problem`` at ``n_out``
    output times:

    * ``"forward"``: forward sensitivities ``S(t_i) = dy(t_i)/d(y0, p)`` for
      every input at once (one solve of the state with ``n + P`` tangent
      directions), contracted with the cotangent of the outputs; under
      ``"auto"`` by the size rule above (``FORWARD_WORK_MIN``);
    * ``"backsolve"``: the adjoint system integrated back between output
      times with the state (as JAX);
    * ``"checkpointed"``: the adjoint integrated back along the state
      re-solved forward from the output before, with dense output (stable
      for stiff problems, whose state cannot be integrated backwards); under
      ``"auto"`` for BDF, Radau and a solve LSODA found stiff."""
    mode = problem.settings.adjoint
    if mode != "auto":
        return mode
    work = problem.n * (problem.n + problem.p)
    if work <= min(FORWARD_WORK_MAX, max(FORWARD_WORK_MIN,
                                         FORWARD_WORK_PER_INTERVAL * (n_out - 1))):
        return "forward"
    method = problem.settings.method
    if method in STIFF_METHODS:
        return "checkpointed"
    if method == ODEINT:
        return "checkpointed" if stiff or stiff is None else "backsolve"
    return "backsolve"
