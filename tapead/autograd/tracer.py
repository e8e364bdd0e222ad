"""autograd's ``tracer``: ``primitive``, ``notrace_primitive``, ``Box``.

``primitive(f_raw)`` makes ``f_raw`` one node of tapead's tape: on traced
arguments it runs ``f_raw`` on their values and records a tapead
``Primitive`` whose VJP and JVP rules are the ones registered with
``defvjp``/``defjvp`` (``tapead.autograd.core``), looked up when a sweep
needs them (as autograd does, so a rule defined after the call still
counts).  Positional arguments may be pytrees (tuples, lists, dicts of
arrays); an output may be one too.  Keyword arguments are passed through
and never differentiated, as in autograd.
"""
from __future__ import annotations

import numpy as np

from tapead import _core, patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._tree import tree_flatten, tree_unflatten
from tapead.autograd.wrap_util import get_name, wraps
from tapead.errors import MissingRuleError
from tapead.tree_util import leaf_shapes, pack_leaves, unpack_leaves

__all__ = ["Box", "getval", "isbox", "notrace_primitive", "primitive", "primitive_jvps",
           "primitive_vjps", "register_notrace"]

#: ``f_wrapped -> vjp_argnums(argnums, ans, args, kwargs)``, which returns
#: ``g -> iterable of cotangents`` (one per argnum), as in autograd.core
primitive_vjps: dict = {}
#: ``f_wrapped -> jvp_argnums(argnums, gs, ans, args, kwargs) -> tangent``
primitive_jvps: dict = {}


class _BoxMeta(type):
    def __instancecheck__(cls, x):
        return isinstance(x, _core.Box)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and (sub is cls or issubclass(sub, _core.Box))


class Box(metaclass=_BoxMeta):
    """What autograd calls a box: ``isinstance(x, Box)`` is true for tapead's
    traced values (reverse-mode ``Tracer``, forward-mode ``Dual``, vmap's
    ``Batched``).  tapead traces numbers, arrays and pytrees of them; new
    box types for other values cannot be registered."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tapead.autograd.Box is not constructed: tapead boxes values itself "
                        "(ta.tree_util.register_pytree_node makes a container traceable)")

    @classmethod
    def register(cls, value_type):
        raise NotImplementedError(
            f"Box.register({getattr(value_type, '__name__', value_type)}): tapead traces "
            "numbers, numpy arrays and pytrees of them, and has no user-defined box types; "
            "register a container class with tapead.tree_util.register_pytree_node")


def isbox(x) -> bool:
    """Whether ``x`` is a traced value."""
    return isinstance(x, _core.Box)


def getval(x):
    """The plain value inside ``x`` (every level of tracing stripped)."""
    return _core.concrete(x)


def register_notrace(trace_type, primitive_fun):
    """autograd's per-trace-type opt-out; tapead has one kind of trace per mode
    and ``notrace_primitive`` for functions without derivatives."""
    raise NotImplementedError("register_notrace: define the function with "
                              "notrace_primitive instead (it never traces its arguments)")


def notrace_primitive(f_raw):
    """``f_raw`` called on the values of its arguments: its result carries no
    derivative (shapes, dtypes, predicates, random numbers)."""
    @wraps(f_raw)
    def f_wrapped(*args, **kwargs):
        return f_raw(*[_core.concrete(a) if isinstance(a, _core.Box) else a for a in args],
                     **kwargs)
    f_wrapped._is_primitive = True
    f_wrapped.fun = f_raw
    return f_wrapped


# ---------------------------------------------------------------------------
# primitive: one tapead node per call
# ---------------------------------------------------------------------------

class _Call:
    """What the rules of one recorded call need besides the values."""
    __slots__ = ("fun", "treedef", "arg_of_leaf", "pos_of_leaf", "out", "cache")

    def __init__(self, fun, treedef, arg_of_leaf, pos_of_leaf):
        self.fun = fun
        self.treedef = treedef
        self.arg_of_leaf = arg_of_leaf
        self.pos_of_leaf = pos_of_leaf
        self.out = None          # None: one array/number; else (treedef, shapes, dtypes)
        self.cache = {}

    def pack(self, out):
        """The output as one value for the tape (a pytree's leaves packed)."""
        if _is_single(out):
            return out
        leaves, tree = tree_flatten(out)
        dts = [np.result_type(x) for x in leaves]
        if any(d.kind not in "fc" for d in dts) or len({d.kind for d in dts}) > 1:
            raise TypeError(
                f"primitive {get_name(self.fun)} returned a {type(out).__name__} with "
                f"leaves of dtypes {[str(d) for d in dts]}; tapead differentiates "
                "containers of floating-point values, all real or all complex: return the "
                "other values from a separate (notrace_)primitive")
        self.out = (tree, leaf_shapes(leaves), dts)
        return pack_leaves(leaves)

    def restore(self, flat):
        """A packed output (or its cotangent/tangent) in the output's structure."""
        if self.out is None:
            return flat
        tree, shapes, _ = self.out
        return tree_unflatten(tree, unpack_leaves(flat, shapes))

    def flatten_like_out(self, t, ans):
        """A tangent in the output's structure, packed like the output."""
        if self.out is None:
            return t
        leaves, _ = tree_flatten(t)
        if len(leaves) != len(self.out[1]):
            raise TypeError(f"JVP of {get_name(self.fun)} returned {len(leaves)} leaves "
                            f"for an output of {len(self.out[1])}")
        return pack_leaves(leaves)


def _is_single(out):
    return isinstance(out, (np.ndarray, float, complex, int, np.generic)) or \
        isinstance(out, _core.Box)


def _impl(*leaves, _call, **kwargs):
    args = tree_unflatten(_call.treedef, list(leaves))
    return _call.pack(_call.fun.fun(*args, **kwargs))


def _zeros_like(x):
    v = _core.concrete(x)
    dt = np.result_type(v)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    return np.zeros(np.shape(v), dtype=dt) if np.ndim(v) else dt.type(0)


def _vjp(k, g, ans, *leaves, _call, **kwargs):
    a = _call.arg_of_leaf[k]
    key = (id(g), a)
    hit = _call.cache.get(key)
    if hit is None:
        fun = _call.fun
        maker = primitive_vjps.get(fun)
        if maker is None:
            raise MissingRuleError(f"VJP of {get_name(fun)} wrt argnums ({a},) not defined: "
                                   "register one with defvjp")
        args = tree_unflatten(_call.treedef, list(leaves))
        vjp = maker((a,), _call.restore(ans), args, kwargs)
        ct = next(iter(vjp(_call.restore(g))))
        if ct is None:
            ct_leaves = None
        else:
            ct_leaves, ct_tree = tree_flatten(ct)
            n = sum(1 for b in _call.arg_of_leaf if b == a)
            if len(ct_leaves) != n:
                raise TypeError(f"VJP of {get_name(fun)} for argument {a} returned "
                                f"{len(ct_leaves)} leaves for an argument of {n}; return a "
                                "cotangent shaped like the argument")
        hit = _call.cache[key] = (ct_leaves, g)
    ct_leaves = hit[0]
    if ct_leaves is None:
        return None
    c = ct_leaves[_call.pos_of_leaf[k]]
    x = leaves[k]
    if not isinstance(c, _core.Box) and np.shape(c) != np.shape(_core.concrete(x)):
        try:
            c = np.broadcast_to(c, np.shape(_core.concrete(x)))
        except ValueError:
            raise ValueError(f"VJP of {get_name(_call.fun)} for argument {a} returned shape "
                             f"{np.shape(c)} for an argument of shape "
                             f"{np.shape(_core.concrete(x))}; unbroadcast it "
                             "(tapead.autograd.numpy.numpy_vjps.unbroadcast_f)") from None
    return c


def _jvp(k, t, ans, *leaves, _call, **kwargs):
    fun = _call.fun
    maker = primitive_jvps.get(fun)
    a = _call.arg_of_leaf[k]
    if maker is None:
        raise MissingRuleError(f"JVP of {get_name(fun)} wrt argnums ({a},) not defined: "
                               "register one with defjvp")
    args = tree_unflatten(_call.treedef, list(leaves))
    arg_leaves = [x for x, b in zip(leaves, _call.arg_of_leaf) if b == a]
    if len(arg_leaves) == 1 and not isinstance(args[a], (tuple, list, dict)):
        g = t
    else:
        pos = _call.pos_of_leaf[k]
        _, td = tree_flatten(args[a])
        g = tree_unflatten(td, [t if j == pos else _zeros_like(x)
                                for j, x in enumerate(arg_leaves)])
    out = maker((a,), (g,), _call.restore(ans), args, kwargs)
    if out is None:
        return None
    return _call.flatten_like_out(out, ans)


def primitive(f_raw):
    """Wrap ``f_raw`` so that its derivative is given by rules (``defvjp``,
    ``defjvp``) rather than by tracing its body.

    On plain arguments the wrapper is ``f_raw`` itself.  On traced ones
    ``f_raw`` runs on their values (it may do anything Python can: in-place
    updates, calls into compiled code) and the call becomes one tape node.

    Examples
    --------
    >>> import numpy as np
    >>> from tapead.autograd import grad
    >>> from tapead.autograd.extend import primitive, defvjp
    >>> @primitive
    ... def cube(x):
    ...     return x ** 3
    >>> defvjp(cube, lambda ans, x: lambda g: 3.0 * g * x ** 2)
    >>> float(grad(lambda x: cube(x) + x)(2.0))
    13.0
    """
    name = get_name(f_raw)
    prim = Primitive(f"autograd[{name}]", _impl)
    prim.defvjp_any(_vjp)
    prim.defjvp_any(_jvp)
    prim.defbatched(PER_DIRECTION)
    prim.defvmap(PER_LANE)               # runs user code: once per lane
    prim.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)
    prim.complex_ok = True               # the user's rules decide complex derivatives

    @wraps(f_raw)
    def f_wrapped(*args, **kwargs):
        for a in args:
            if isinstance(a, _core.Box):
                break
        else:
            if not any(type(a) in (list, tuple, dict) for a in args):
                return f_raw(*args, **kwargs)
        leaves, treedef = tree_flatten(args)
        if not any(isinstance(x, _core.Box) for x in leaves):
            return f_raw(*args, **kwargs)
        arg_of_leaf, pos_of_leaf = [], []
        for a, x in enumerate(args):
            n = len(tree_flatten(x)[0])
            arg_of_leaf.extend([a] * n)
            pos_of_leaf.extend(range(n))
        call = _Call(f_wrapped, treedef, arg_of_leaf, pos_of_leaf)
        out = _core.bind(prim, *leaves, _call=call, **kwargs)
        return call.restore(out)

    f_wrapped.fun = f_raw
    f_wrapped._is_autograd_primitive = True
    f_wrapped.prim = prim
    return f_wrapped
