"""User-defined derivative rules: ``custom_jvp`` and ``custom_vjp`` (JAX's API).

A decorated function becomes one primitive node on the tape.  With
``custom_jvp`` the rule gives forward mode directly; reverse mode
transposes it by differentiating ``<g, jvp(primals, t)>`` with respect to
``t`` (the rule is linear in ``t``), so one rule serves both modes.  With
``custom_vjp`` the rule gives reverse mode; forward mode falls back to
differentiating the original function.

>>> import tapead as ta, tapead.numpy as tnp
>>> @ta.custom_jvp
... def f(x, y):
...     return tnp.sin(x) * y
>>> @f.defjvp
... def f_jvp(primals, tangents):
...     x, y = primals
...     x_dot, y_dot = tangents
...     return f(x, y), tnp.cos(x) * x_dot * y + tnp.sin(x) * y_dot
>>> print(f(2., 3.))        # JAX's float32 result prints as 2.7278922
2.727892280477045
>>> y, y_dot = ta.jvp(f, (2., 3.), (1., 0.))
>>> print(y, y_dot)
2.727892280477045 -1.2484405096414273
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import numpy as np

from tapead import _core
from tapead._core import Box
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._prims.reductions import sum as _sum
from tapead._tree import tree_flatten, tree_unflatten
from tapead.errors import MissingRuleError
from tapead.tree_util import leaf_shapes as _shapes, pack_leaves as _pack, unpack_leaves as _unpack
from tapead.transforms import grad, jvp

__all__ = ["custom_jvp", "custom_vjp"]


def _zeros_like(x):
    x = _core.concrete(x)
    return np.zeros(np.shape(x), dtype=np.result_type(x)) if np.ndim(x) else \
        np.result_type(x).type(0.0)


def _flat_out(out, info):
    leaves, tree = tree_flatten(out)
    info["tree"], info["shapes"] = tree, _shapes(leaves)
    return _pack(leaves) if (len(leaves) != 1 or np.ndim(_core.concrete(leaves[0]))) \
        else leaves[0]


def _restore(flat, info):
    if len(info["shapes"]) == 1 and info["shapes"][0] == ():
        return tree_unflatten(info["tree"], [flat])
    return tree_unflatten(info["tree"], _unpack(flat, info["shapes"]))


def _as_flat_cotangent(g, info):
    if len(info["shapes"]) == 1 and info["shapes"][0] == ():
        return [g]
    return _unpack(g, info["shapes"])


def _nondiff(nondiff_argnums):
    nums = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else tuple(nondiff_argnums)
    if any(not isinstance(k, int) or k < 0 for k in nums):
        raise ValueError(f"nondiff_argnums must be non-negative ints, got {nondiff_argnums!r}")
    return tuple(sorted(set(nums)))


def _split_args(custom, args):
    """(the non-differentiable arguments, the others) of a call."""
    nums = custom.nondiff_argnums
    if not nums:
        return (), args
    if nums[-1] >= len(args):
        raise TypeError(f"{custom.__name__}: nondiff_argnums {nums} names argument "
                        f"{nums[-1]}, but the call has {len(args)} positional arguments")
    nd = tuple(args[k] for k in nums)
    for k, v in zip(nums, nd):
        if any(isinstance(x, Box) for x in tree_flatten(v)[0]):
            raise TypeError(
                f"{custom.__name__}: argument {k} is in nondiff_argnums but holds a traced "
                "value; non-differentiable arguments must not depend on the inputs being "
                "differentiated (pass it as an ordinary argument and return a zero "
                "cotangent / tangent for it instead)")
    return nd, tuple(a for k, a in enumerate(args) if k not in nums)


def _merge_args(nums, nd, diff):
    """The full positional arguments from the two parts of ``_split_args``."""
    if not nums:
        return tuple(diff)
    out, it_nd, it_diff = [], iter(nd), iter(diff)
    for k in range(len(nd) + len(diff)):
        out.append(next(it_nd) if k in nums else next(it_diff))
    return tuple(out)


class custom_jvp:
    """Give a function its own forward-mode rule (``@f.defjvp``).

    ``jvp_rule(primals, tangents) -> (primal_out, tangent_out)``, with the
    tuples of ``f``'s positional arguments; ``tangent_out`` has the shape of
    ``f``'s output.  Reverse mode transposes the rule (it must be linear in
    the tangents), so one rule serves ``grad``, ``jvp`` and their nestings.
    Calling ``f`` before a rule is defined raises ``MissingRuleError``.

    With ``nondiff_argnums`` (as in JAX) those arguments are passed first and
    are left out of ``primals`` and ``tangents``:
    ``jvp_rule(*nondiff_args, primals, tangents)``.

    Parameters
    ----------
    fun : callable
        The function; its positional arguments are floats, arrays or
        pytrees of them.
    nondiff_argnums : int or tuple of int
        Positions of arguments that are not differentiated (functions,
        integers, options); they must not hold traced values.

    Examples
    --------
    >>> import numpy as np, tapead as ta, tapead.numpy as tnp
    >>> @ta.custom_jvp
    ... def softplus(x):
    ...     return tnp.logaddexp(x, 0.0)
    >>> @softplus.defjvp
    ... def softplus_jvp(primals, tangents):
    ...     (x,), (x_dot,) = primals, tangents
    ...     return softplus(x), x_dot / (1.0 + tnp.exp(-x))
    >>> print(ta.grad(softplus)(0.0), ta.jvp(softplus, (800.0,), (1.0,))[1])
    0.5 1.0

    A non-differentiable argument (here a function):

    >>> import functools
    >>> @functools.partial(ta.custom_jvp, nondiff_argnums=(0,))
    ... def apply(fn, x):
    ...     return fn(x)
    >>> @apply.defjvp
    ... def apply_jvp(fn, primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return fn(x), 2.0 * t            # a deliberately simple rule
    >>> float(ta.grad(lambda x: apply(tnp.sin, x))(0.3))
    2.0
    """

    def __init__(self, fun: Callable, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff(nondiff_argnums)
        self.jvp_rule: Optional[Callable] = None
        self.prim = Primitive(f"custom_jvp[{getattr(fun, '__name__', 'f')}]", self._impl)
        self.prim.defjvp_any(self._jvp_k)
        self.prim.defvjp_any(self._vjp_k)
        self.prim.defbatched(PER_DIRECTION)
        self.prim.defvmap(PER_LANE)           # runs user code: once per lane
        self.prim.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)

    def defjvp(self, jvp_rule: Callable) -> Callable:
        """Register ``jvp_rule(primals, tangents) -> (out, tangent_out)``;
        returns it, so it works as a decorator."""
        self.jvp_rule = jvp_rule
        return jvp_rule

    def _impl(self, *leaves, treedef, info, cache, nondiff=()):
        args = _merge_args(self.nondiff_argnums, nondiff, tree_unflatten(treedef, list(leaves)))
        return _flat_out(self.fun(*args), info)

    def _rule_tangent(self, leaves, tangent_leaves, treedef, info, nondiff):
        primals = tree_unflatten(treedef, list(leaves))
        tangents = tree_unflatten(treedef, list(tangent_leaves))
        _, t_out = self.jvp_rule(*nondiff, tuple(primals), tuple(tangents))
        return _flat_out(t_out, dict(info))

    def _jvp_k(self, k, t, ans, *leaves, treedef, info, cache, nondiff=()):
        tl = [t if j == k else _zeros_like(x) for j, x in enumerate(leaves)]
        return self._rule_tangent(leaves, tl, treedef, info, nondiff)

    def _vjp_k(self, k, g, ans, *leaves, treedef, info, cache, nondiff=()):
        if cache.get("key") != id(g):
            g_flat = g

            def inner(*tl):
                return _sum(g_flat * self._rule_tangent(leaves, tl, treedef, info, nondiff))
            zeros = [_zeros_like(x) for x in leaves]
            cts = grad(inner, argnums=tuple(range(len(leaves))))(*zeros)
            cache["key"], cache["cts"], cache["g"] = id(g), cts, g
        return cache["cts"][k]

    def __call__(self, *args):
        if self.jvp_rule is None:
            raise MissingRuleError(f"custom_jvp function {self.__name__} has no rule yet: "
                                   f"decorate one with @{self.__name__}.defjvp")
        return _call_custom(self, args)


class custom_vjp:
    """Give a function its own reverse-mode rule (``f.defvjp(fwd, bwd)``).

    ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, g) -> tuple`` of
    cotangents, one per positional argument, each shaped like its argument
    (``g`` is shaped like ``out``).  Forward mode differentiates the
    original function.  Calling ``f`` before ``defvjp`` raises
    ``MissingRuleError``.  With ``nondiff_argnums`` (as in JAX) ``fwd`` still
    takes every argument, while ``bwd(*nondiff_args, residuals, g)`` returns
    cotangents for the other arguments only.

    Parameters
    ----------
    fun : callable
        The function; its positional arguments are floats, arrays or
        pytrees of them.
    nondiff_argnums : int or tuple of int
        Positions of arguments that are not differentiated; they must not
        hold traced values.

    Examples
    --------
    >>> import tapead as ta, tapead.numpy as tnp
    >>> @ta.custom_vjp
    ... def clip_gradient(x, bound):
    ...     return x
    >>> clip_gradient.defvjp(lambda x, bound: (x, bound),
    ...                      lambda bound, g: (tnp.clip(g, -bound, bound), 0.0))
    >>> print(ta.grad(lambda x: 10.0 * clip_gradient(x, 1.0))(3.0))
    1.0

    With the bound as a non-differentiable argument:

    >>> import functools
    >>> @functools.partial(ta.custom_vjp, nondiff_argnums=(1,))
    ... def clip_gradient2(x, limit):
    ...     return x
    >>> clip_gradient2.defvjp(lambda x, limit: (x, None),
    ...                       lambda limit, res, g: (tnp.clip(g, -limit, limit),))
    >>> float(ta.grad(lambda x: 10.0 * clip_gradient2(x, 2.0))(1.0))
    2.0
    """

    def __init__(self, fun: Callable, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff(nondiff_argnums)
        self.fwd: Optional[Callable] = None
        self.bwd: Optional[Callable] = None
        self.prim = Primitive(f"custom_vjp[{getattr(fun, '__name__', 'f')}]", self._impl)
        self.prim.defvjp_any(self._vjp_k)
        self.prim.defjvp_any(self._jvp_k)
        self.prim.defbatched(PER_DIRECTION)
        self.prim.defvmap(PER_LANE)           # runs user code: once per lane
        self.prim.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Register ``fwd(*args) -> (out, residuals)`` and
        ``bwd(residuals, g) -> tuple of cotangents``."""
        self.fwd, self.bwd = fwd, bwd

    def _args(self, leaves, treedef, nondiff):
        return _merge_args(self.nondiff_argnums, nondiff, tree_unflatten(treedef, list(leaves)))

    def _impl(self, *leaves, treedef, info, cache, nondiff=()):
        out, res = self.fwd(*self._args(leaves, treedef, nondiff))
        # nested transforms call impl at the outermost level only: remember for
        # which argument objects these residuals were computed
        cache["res"], cache["res_for"] = res, tuple(map(id, leaves)) + (leaves,)
        return _flat_out(out, info)

    def _vjp_k(self, k, g, ans, *leaves, treedef, info, cache, nondiff=()):
        if cache.get("key") != id(g):
            g_tree = _restore_cotangent(g, info)
            if cache.get("res_for", ())[:len(leaves)] == tuple(map(id, leaves)):
                res = cache["res"]
            else:                     # residuals at this level: run fwd on its values
                res = self.fwd(*self._args(leaves, treedef, nondiff))[1]
            cts = self.bwd(*nondiff, res, g_tree)
            if not isinstance(cts, tuple):
                raise TypeError(f"custom_vjp {self.__name__}: bwd must return a tuple "
                                "with one cotangent per positional argument"
                                + (" not in nondiff_argnums" if nondiff else ""))
            ct_leaves, _ = tree_flatten(cts)
            if len(ct_leaves) != len(leaves):
                raise TypeError(f"custom_vjp {self.__name__}: bwd returned "
                                f"{len(ct_leaves)} cotangent leaves for {len(leaves)} "
                                "input leaves; return one per argument, same structure")
            cache["key"], cache["cts"], cache["g"] = id(g), ct_leaves, g
        return cache["cts"][k]

    def _jvp_k(self, k, t, ans, *leaves, treedef, info, cache, nondiff=()):
        tl = [t if j == k else _zeros_like(x) for j, x in enumerate(leaves)]

        def flat(*ls):
            return _flat_out(self.fun(*self._args(ls, treedef, nondiff)), dict(info))
        return jvp(flat, tuple(leaves), tuple(tl))[1]

    def __call__(self, *args):
        if self.fwd is None:
            raise MissingRuleError(f"custom_vjp function {self.__name__} has no rule yet: "
                                   f"call {self.__name__}.defvjp(fwd, bwd)")
        return _call_custom(self, args)


def _call_custom(custom, args):
    """Plain arguments: the function itself; traced ones: one primitive node."""
    nondiff, diff = _split_args(custom, args)
    leaves, treedef = tree_flatten(diff)
    if not any(isinstance(x, Box) for x in leaves):
        return custom.fun(*args)
    info: dict = {}
    flat = _core.bind(custom.prim, *leaves, treedef=treedef, info=info, cache={},
                      nondiff=nondiff)
    return _restore(flat, info)


def _restore_cotangent(g, info):
    return tree_unflatten(info["tree"], _as_flat_cotangent(g, info))
