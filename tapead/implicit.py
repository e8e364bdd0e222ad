"""Derivatives of solutions by the implicit function theorem.

``custom_root`` and ``fixed_point`` run a solver without recording it, then
differentiate the solution ``x*`` of ``r(x*, theta) = 0`` as

    dx*/dtheta = -(dr/dx)^{-1} dr/dtheta        at (x*, theta),

one linear solve per derivative, however many iterations the solver took;
no iteration is stored.  The solution is one tape node whose rules are
written with tapead's own transforms (``jvp``, ``vjp``, ``jacfwd``,
``linalg.solve``) at the traced solution, so they differentiate again
(second order).

``fixed_point(f, x0, *params)`` takes the parameters explicitly.
``custom_root(f, initial_guess, solve, tangent_solve)`` follows
``jax.lax.custom_root``, where ``f`` closes over the values to
differentiate: tapead finds the traced values ``f`` reaches (its closure
cells, the functions and objects held there: ``tapead.closures``) and treats
them as the inputs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tapead import _core, closures
from tapead._core import Box
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._tree import tree_flatten, tree_unflatten
from tapead.tree_util import leaf_shapes as _shapes, pack_leaves as _pack, unpack_leaves as _unpack
import tapead.numpy as tnp
from tapead.transforms import jacfwd, jvp, vjp

__all__ = ["custom_root", "fixed_point"]


def _flat_vec(leaves):
    """One 1-d vector of leaves (traced or not); a lone 1-d leaf as it is."""
    if len(leaves) == 1 and np.ndim(_core.concrete(leaves[0])) == 1:
        return leaves[0]
    return _pack(leaves)


class _Problem:
    """``r(x, *theta)`` on flat vectors, plus how to rebuild ``x``'s pytree."""

    def __init__(self, residual, x_tree, x_shapes, tangent_solve):
        self.residual = residual          # (x pytree, *theta) -> pytree like x
        self.x_tree, self.x_shapes = x_tree, x_shapes
        self.tangent_solve = tangent_solve   # None: dense solve

    def x_of(self, vec):
        if len(self.x_shapes) == 1 and len(self.x_shapes[0]) == 1:
            return tree_unflatten(self.x_tree, [vec])
        return tree_unflatten(self.x_tree, _unpack(vec, self.x_shapes))

    def r_flat(self, xv, *theta):
        out = self.residual(self.x_of(xv), *theta)
        leaves, tree = tree_flatten(out)
        if tree != self.x_tree or _shapes(leaves) != self.x_shapes:
            raise TypeError(
                "the function must return a value with the structure and shapes of the "
                f"solution ({self.x_tree}, shapes {self.x_shapes}); it returned {tree}, "
                f"shapes {_shapes(leaves)}")
        return _flat_vec(leaves)

    def solve_linear(self, xv, theta, rhs, transpose):
        """Solve ``(dr/dx) v = rhs`` (or its transpose) at ``(xv, theta)``."""
        if self.tangent_solve is None:
            J = jacfwd(lambda v: self.r_flat(v, *theta))(xv)
            if np.ndim(_core.concrete(J)) == 0:
                return rhs / J
            return tnp.linalg.solve(tnp.transpose(J) if transpose else J, rhs)
        if transpose:
            pull = vjp(lambda v: self.r_flat(v, *theta), xv)[1]

            def g(v):
                return self.x_of(pull(_flat_vec(tree_flatten(v)[0]))[0])
        else:
            def g(v):
                return self.x_of(jvp(lambda u: self.r_flat(u, *theta), (xv,),
                                     (_flat_vec(tree_flatten(v)[0]),))[1])
        sol = self.tangent_solve(g, self.x_of(rhs))
        return _flat_vec(tree_flatten(sol)[0])


def _implicit_impl(*theta, problem, run_solver, cache):
    xv = run_solver(*theta)
    if isinstance(xv, Box):
        raise ValueError(
            "the solver's result depends on a traced value that is not one of the "
            "inputs tapead can see (for custom_root: a value held in f's closure; for "
            "fixed_point: the params). Pass it explicitly: ta.fixed_point(f, x0, *params), "
            "or bind it to a local variable that f closes over.")
    return xv


def _implicit_jvp(k, t, ans, *theta, problem, run_solver, cache):
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(v)))
                for j, v in enumerate(theta)]
    b = jvp(lambda *th: problem.r_flat(ans, *th), tuple(theta), tuple(tangents))[1]
    return problem.solve_linear(ans, theta, -b, transpose=False)


def _implicit_vjp(k, g, ans, *theta, problem, run_solver, cache):
    if cache.get("key") != id(g):
        w = problem.solve_linear(ans, theta, -g, transpose=True)
        pull = vjp(lambda *th: problem.r_flat(ans, *th), *theta)[1]
        cache["key"], cache["cts"], cache["g"] = id(g), list(pull(w)), g
    return cache["cts"][k]


implicit_p = Primitive("implicit_solution", _implicit_impl)
implicit_p.defvjp_any(_implicit_vjp)
implicit_p.defjvp_any(_implicit_jvp)
implicit_p.defbatched(PER_DIRECTION)
implicit_p.defvmap(PER_LANE)           # runs user code: once per lane
implicit_p.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)


def _solution(problem, run_solver, theta, like):
    """Bind the solution node (or solve directly when nothing is traced)."""
    if not any(isinstance(v, Box) for v in theta):
        return problem.x_of(_implicit_impl(*theta, problem=problem, run_solver=run_solver,
                                           cache={}))
    xv = _core.bind(implicit_p, *theta, problem=problem, run_solver=run_solver, cache={})
    return problem.x_of(xv)


# ---------------------------------------------------------------------------
# fixed_point
# ---------------------------------------------------------------------------

def fixed_point(f: Callable, x0: Any, *params: Any, tol: float = 1e-12,
                max_iter: int = 10_000) -> Any:
    """The fixed point ``x* = f(x*, *params)``, differentiable in ``params``.

    Iterates ``x <- f(x, *params)`` from ``x0`` until the change is below
    ``tol`` (relative to the size of ``x``), without recording; derivatives
    come from the implicit function theorem at ``x*``: one dense linear
    solve with ``I - df/dx`` (so ``x`` should have at most a few thousand
    elements), forward, reverse and higher order.  ``x*`` does not depend on
    ``x0``: its derivative with respect to ``x0`` is zero.

    Parameters
    ----------
    f : callable
        ``(x, *params) -> x`` with ``x``'s structure and shapes; a
        contraction near ``x*``.
    x0 : pytree of arrays or float
        The starting point.
    *params : pytrees
        The values to differentiate with respect to.
    tol : float
        Stop when ``max|x_new - x| <= tol * max(1, max|x|)``.
    max_iter : int
        Raise ``RuntimeError`` when not converged after this many steps.

    Returns
    -------
    pytree
        ``x*``, structured like ``x0``.

    Examples
    --------
    >>> import numpy as np, tapead as ta, tapead.numpy as tnp
    >>> x = ta.fixed_point(lambda x, a: tnp.cos(x) * a, 0.5, 0.9)
    >>> bool(np.isclose(x, np.cos(x) * 0.9))
    True
    >>> g = ta.grad(lambda a: ta.fixed_point(lambda x, a: tnp.cos(x) * a, 0.5, a))(0.9)
    >>> bool(np.isclose(g, np.cos(x) / (1 + 0.9 * np.sin(x))))
    True
    """
    if not callable(f):
        raise TypeError(f"fixed_point: f must be callable, got {type(f).__name__}")
    x_leaves, x_tree = tree_flatten(x0)
    x_plain = [np.asarray(_core.concrete(v), dtype=np.result_type(_core.concrete(v), 0.0))
               for v in x_leaves]
    theta, p_tree = tree_flatten(params)
    problem = _Problem(lambda x, *th: _sub(f(x, *tree_unflatten(p_tree, list(th))), x),
                       x_tree, _shapes(x_plain), None)

    def run_solver(*th):
        fp = lambda x: f(x, *tree_unflatten(p_tree, list(th)))     # noqa: E731
        x = tree_unflatten(x_tree, x_plain)
        for _ in range(int(max_iter)):
            new = fp(x)
            new_leaves, t = tree_flatten(new)
            if t != x_tree or _shapes(new_leaves) != problem.x_shapes:
                raise TypeError("fixed_point: f must return a value with the structure and "
                                f"shapes of x0 ({x_tree}, {problem.x_shapes}); it returned "
                                f"{t}, {_shapes(new_leaves)}")
            if any(isinstance(v, Box) for v in new_leaves):
                return _pack(new_leaves)        # reported by the primitive
            old = tree_flatten(x)[0]
            step = max((float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                        for a, b in zip(new_leaves, old)), default=0.0)
            size = max((float(np.max(np.abs(a))) for a in new_leaves if np.size(a)),
                       default=0.0)
            x = new
            if step <= tol * max(1.0, size):
                return _flat_vec(new_leaves)
        raise RuntimeError(f"fixed_point: no convergence after max_iter={max_iter} "
                           f"steps (last change {step:.3g}); f may not be a contraction "
                           "near the fixed point, or raise max_iter / tol")
    return _solution(problem, run_solver, theta, x0)


def _sub(a, b):
    la, ta_ = tree_flatten(a)
    lb, _ = tree_flatten(b)
    return tree_unflatten(ta_, [u - v for u, v in zip(la, lb)])


# ---------------------------------------------------------------------------
# custom_root
# ---------------------------------------------------------------------------

def custom_root(f: Callable, initial_guess: Any, solve: Callable,
                tangent_solve: Callable) -> Any:
    """``jax.lax.custom_root``: a root of ``f``, differentiated implicitly.

    Parameters
    ----------
    f : callable
        ``x -> residual`` with ``x``'s structure; it may close over the
        values to differentiate (traced values in its closure cells, or in
        those of functions it holds, are found and become the inputs).
    initial_guess : pytree
        The solver's starting point (no derivative flows through it).
    solve : callable
        ``solve(f, initial_guess) -> x`` with ``f(x) = 0``; it runs on plain
        values and is not recorded.
    tangent_solve : callable
        ``tangent_solve(g, y) -> v`` solving the linear ``g(v) = y``; it is
        called with the linearisation of ``f`` at the root (and with its
        transpose in reverse mode), e.g. ``lambda g, y: y / g(1.0)`` for a
        scalar.  Write it with tapead operations for second derivatives.

    Returns
    -------
    pytree
        The root; its derivatives follow from ``f(x*(theta), theta) = 0``.

    Examples
    --------
    >>> import tapead as ta
    >>> def newton(f, x):
    ...     for _ in range(30):
    ...         x = x - f(x) / ta.grad(f)(x)
    ...     return x
    >>> def sqrt_cubed(a):
    ...     return ta.custom_root(lambda y: y ** 2 - a ** 3, 1.0, newton,
    ...                           lambda g, y: y / g(1.0))
    >>> float(sqrt_cubed(4.0)), float(ta.grad(sqrt_cubed)(4.0))
    (8.0, 3.0)
    """
    for fun, name in ((f, "f"), (solve, "solve"), (tangent_solve, "tangent_solve")):
        if not callable(fun):
            raise TypeError(f"custom_root: {name} must be callable, got "
                            f"{type(fun).__name__}")
    closure = closures.find(f)
    theta = list(closure.values)

    def explicit(x, *th):
        return closure.call(f, th, x)
    x_leaves, x_tree = tree_flatten(initial_guess)
    guess = tree_unflatten(x_tree, [_core.concrete(v) for v in x_leaves])
    problem = _Problem(explicit, x_tree, _shapes(x_leaves), tangent_solve)

    def run_solver(*th):
        x = solve(lambda v: explicit(v, *th), guess)
        leaves, t = tree_flatten(x)
        if t != x_tree or _shapes(leaves) != problem.x_shapes:
            raise TypeError("custom_root: solve must return a value with the structure and "
                            f"shapes of initial_guess ({x_tree}, {problem.x_shapes}); it "
                            f"returned {t}, {_shapes(leaves)}")
        return _flat_vec(leaves)
    return _solution(problem, run_solver, theta, initial_guess)
