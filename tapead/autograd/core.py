"""autograd's ``core``: ``make_vjp``/``make_jvp`` of one argument, the rule
registration (``defvjp``, ``defjvp`` and their ``_argnum(s)`` forms,
``def_linear``) and vector spaces (``vspace``).

``make_vjp`` and ``make_jvp`` are tapead's ``vjp`` and ``jvp`` with
autograd's return conventions: ``make_vjp(f, x) -> (vjp, f(x))`` and
``make_jvp(f, x)(v) -> (f(x), J v)``.  The rules registered here are read by
the primitives of ``tapead.autograd.tracer``.
"""
from __future__ import annotations

import warnings
from itertools import count

import numpy as np

from tapead import _core
from tapead import numpy as tnp
from tapead.autograd._subst import subval
from tapead.autograd.tracer import (Box, getval, isbox, notrace_primitive,  # noqa: F401
                                    primitive_jvps, primitive_vjps)
from tapead.autograd.tracer import primitive as _primitive
from tapead.transforms import jvp as _jvp
from tapead.transforms import vjp as _vjp

__all__ = ["primitive_with_deprecation_warnings", "make_vjp", "make_jvp", "defvjp", "defvjp_argnum", "defvjp_argnums", "defjvp",
           "defjvp_argnum", "defjvp_argnums", "def_linear", "VSpace", "vspace",
           "primitive", "primitive_vjps", "primitive_jvps", "Box"]


# -------------------- reverse and forward mode --------------------

def make_vjp(fun, x):
    """``(vjp, fun(x))``: ``vjp(g)`` is ``g`` pulled back to ``x`` (``g`` shaped like
    ``fun(x)``); it can be called many times, on traced ``g`` too."""
    out, pullback = _vjp(fun, x)
    return (lambda g: pullback(g)[0]), out


def make_jvp(fun, x):
    """``jvp(v) -> (fun(x), J v)``, by dual numbers (one run of ``fun`` per call)."""
    def jvp(v):
        return _jvp(fun, (x,), (v,))
    return jvp


# -------------------- reverse-mode rules --------------------

def defvjp_argnums(fun, vjpmaker):
    """``vjpmaker(argnums, ans, args, kwargs)`` returns ``g -> cotangents`` (one for
    each argnum, in order)."""
    _check_primitive(fun, "defvjp_argnums")
    primitive_vjps[fun] = vjpmaker


def defvjp_argnum(fun, vjpmaker):
    """``vjpmaker(argnum, ans, args, kwargs)`` returns ``g -> cotangent``."""
    def vjp_argnums(argnums, *args):
        vjps = [vjpmaker(argnum, *args) for argnum in argnums]
        return lambda g: (vjp(g) for vjp in vjps)
    defvjp_argnums(fun, vjp_argnums)


def defvjp(fun, *vjpmakers, **kwargs):
    """One maker per positional argument (``argnums=`` says which):
    ``maker(ans, *args, **kwargs)`` returns ``g -> cotangent``; ``None`` marks
    an argument without derivative (a zero cotangent)."""
    argnums = kwargs.get("argnums", count())
    vjps = {}
    for argnum, maker in zip(argnums, vjpmakers):
        if maker is not None and not callable(maker):
            raise TypeError(f"Bad VJP '{maker}' for '{getattr(fun, '__name__', fun)}'")
        vjps[argnum] = maker

    def vjp_argnums(argnums, ans, args, kwargs):
        out = []
        for argnum in argnums:
            if argnum not in vjps:
                raise NotImplementedError(
                    f"VJP of {getattr(fun, '__name__', fun)} wrt argnum {argnum} not defined")
            maker = vjps[argnum]
            out.append(None if maker is None else maker(ans, *args, **kwargs))
        return lambda g: (None if v is None else v(g) for v in out)
    defvjp_argnums(fun, vjp_argnums)


# -------------------- forward-mode rules --------------------

def defjvp_argnums(fun, jvpmaker):
    """``jvpmaker(argnums, gs, ans, args, kwargs)`` returns the output tangent
    for the tangents ``gs`` of the arguments ``argnums``."""
    _check_primitive(fun, "defjvp_argnums")
    primitive_jvps[fun] = jvpmaker


def _sum(ts):
    total = None
    for t in ts:
        if t is not None:
            total = t if total is None else total + t
    return total


def defjvp_argnum(fun, jvpmaker):
    """``jvpmaker(argnum, g, ans, args, kwargs)`` returns the output tangent."""
    def jvp_argnums(argnums, gs, ans, args, kwargs):
        return _sum(jvpmaker(argnum, g, ans, args, kwargs) for argnum, g in zip(argnums, gs))
    defjvp_argnums(fun, jvp_argnums)


def defjvp(fun, *jvpfuns, **kwargs):
    """One rule per positional argument (``argnums=`` says which):
    ``jvp(g, ans, *args, **kwargs)`` returns the output tangent for the
    tangent ``g`` of that argument; ``None`` marks no derivative and
    ``"same"`` a function linear in that argument (its tangent is the
    function applied to ``g``)."""
    argnums = kwargs.get("argnums", count())
    jvps = {}
    for argnum, j in zip(argnums, jvpfuns):
        if j == "same":
            j = (lambda a: lambda g, ans, *args, **kw: fun(*subval(args, a, g), **kw))(argnum)
        elif j is not None and not callable(j):
            raise TypeError(f"Bad JVP '{j}' for '{getattr(fun, '__name__', fun)}'")
        jvps[argnum] = j

    def jvp_argnums(argnums, gs, ans, args, kwargs):
        parts = []
        for argnum, g in zip(argnums, gs):
            if argnum not in jvps:
                raise NotImplementedError(
                    f"JVP of {getattr(fun, '__name__', fun)} wrt argnum {argnum} not defined")
            j = jvps[argnum]
            parts.append(None if j is None else j(g, ans, *args, **kwargs))
        return _sum(parts)
    defjvp_argnums(fun, jvp_argnums)


def def_linear(fun):
    """Declare ``fun`` linear in each argument: forward mode applies it to the
    tangent."""
    defjvp_argnum(fun, lambda argnum, g, ans, args, kwargs: fun(*subval(args, argnum, g),
                                                                **kwargs))


def _check_primitive(fun, what):
    if not getattr(fun, "_is_autograd_primitive", False):
        raise TypeError(f"{what}: {getattr(fun, '__name__', fun)!r} is not a primitive; "
                        "wrap the function with tapead.autograd.extend.primitive first")


# -------------------- vector spaces --------------------

class VSpace:
    """The vector space of a value: ``zeros``, ``ones``, ``randn``,
    ``standard_basis``, ``add``, ``scalar_mul``, ``inner_prod``, ``covector``,
    ``size``, as in autograd (used by ``check_grads`` and the optimizers).
    The operations are written with differentiable tapead operations."""
    iscomplex = False
    mappings: dict = {}

    def __init__(self, value):
        pass

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self), self._key()))

    def __repr__(self):
        return f"{type(self).__name__}_{self._key()}"

    def add(self, x, y):
        return self._add(x, y)

    def mut_add(self, x_prev, x_new):
        return self._add(self.zeros() if x_prev is None else x_prev, x_new)

    def scalar_mul(self, x, a):
        return self._scalar_mul(x, a)

    def inner_prod(self, x, y):
        return self._inner_prod(x, y)

    def covector(self, x):
        return self._covector(x)

    def _covector(self, x):
        return x

    @classmethod
    def register(cls, value_type, vspace_maker=None):
        VSpace.mappings[value_type] = vspace_maker or cls


class ArrayVSpace(VSpace):
    def __init__(self, value):
        value = np.asarray(value)
        self.shape = value.shape
        self.dtype = value.dtype

    def _key(self):
        return (self.shape, self.dtype)

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def ndim(self):
        return len(self.shape)

    def zeros(self):
        return np.zeros(self.shape, dtype=self.dtype)

    def ones(self):
        return np.ones(self.shape, dtype=self.dtype)

    def standard_basis(self):
        for idxs in np.ndindex(*self.shape):
            v = np.zeros(self.shape, dtype=self.dtype)
            v[idxs] = 1
            yield v

    def randn(self):
        return np.array(np.random.randn(*self.shape)).astype(self.dtype)

    def _add(self, x, y):
        return x + y

    def _scalar_mul(self, x, a):
        return x * a

    def _inner_prod(self, x, y):
        return tnp.dot(tnp.ravel(x), tnp.ravel(y))


class ComplexArrayVSpace(ArrayVSpace):
    iscomplex = True

    @property
    def size(self):
        return int(np.prod(self.shape)) * 2

    def ones(self):
        return np.ones(self.shape, dtype=self.dtype) + 1.0j * np.ones(self.shape,
                                                                       dtype=self.dtype)

    def standard_basis(self):
        for idxs in np.ndindex(*self.shape):
            for v in (1.0, 1.0j):
                vect = np.zeros(self.shape, dtype=self.dtype)
                vect[idxs] = v
                yield vect

    def randn(self):
        return (np.array(np.random.randn(*self.shape)).astype(self.dtype)
                + 1.0j * np.array(np.random.randn(*self.shape)).astype(self.dtype))

    def _inner_prod(self, x, y):
        return tnp.real(tnp.dot(tnp.conj(tnp.ravel(x)), tnp.ravel(y)))

    def _covector(self, x):
        return tnp.conj(x)


class ContainerVSpace(VSpace):
    """tuples, lists, dicts (and namedtuples) of values with vector spaces."""

    def __init__(self, value):
        self.kind = type(value)
        if isinstance(value, dict):
            self.keys = list(value)
            self.parts = [vspace(value[k]) for k in self.keys]
        else:
            self.keys = None
            self.parts = [vspace(v) for v in value]

    def _key(self):
        return (self.kind, None if self.keys is None else tuple(self.keys), tuple(self.parts))

    @property
    def shape(self):
        return self._make(self.parts)

    @property
    def size(self):
        return sum(vs.size for vs in self.parts)

    @property
    def iscomplex(self):
        return any(vs.iscomplex for vs in self.parts)

    def _items(self, x):
        return [x[k] for k in self.keys] if self.keys is not None else list(x)

    def _make(self, items):
        if self.keys is not None:
            return self.kind(zip(self.keys, items)) if self.kind is not dict else \
                dict(zip(self.keys, items))
        if self.kind in (tuple, list):
            return self.kind(items)
        return self.kind(*items)                     # a namedtuple

    def _map(self, f, *xs):
        return self._make([f(vs, *[self._items(x)[i] for x in xs])
                           for i, vs in enumerate(self.parts)])

    def zeros(self):
        return self._make([vs.zeros() for vs in self.parts])

    def ones(self):
        return self._make([vs.ones() for vs in self.parts])

    def randn(self):
        return self._make([vs.randn() for vs in self.parts])

    def standard_basis(self):
        for i, vs in enumerate(self.parts):
            for x in vs.standard_basis():
                items = [p.zeros() for p in self.parts]
                items[i] = x
                yield self._make(items)

    def _add(self, xs, ys):
        return self._map(lambda vs, x, y: vs._add(x, y), xs, ys)

    def _scalar_mul(self, xs, a):
        return self._map(lambda vs, x: vs._scalar_mul(x, a), xs)

    def _inner_prod(self, xs, ys):
        total = 0.0
        for vs, x, y in zip(self.parts, self._items(xs), self._items(ys)):
            total = total + vs._inner_prod(x, y)
        return total

    def _covector(self, xs):
        return self._map(lambda vs, x: vs._covector(x), xs)


def vspace(value):
    """The vector space of ``value`` (a number, an array, a traced value, or a
    tuple/list/dict of them)."""
    maker = VSpace.mappings.get(type(value))
    if maker is not None:
        return maker(value)
    if isinstance(value, _core.Box):          # shape and dtype of one value (one lane)
        kind = np.result_type(_core.lanes_of(value))
        return _array_vspace(np.zeros(_core.shape_of(value), dtype=kind))
    if isinstance(value, (tuple, list, dict)):
        return ContainerVSpace(value)
    if isinstance(value, np.ndarray):
        return _array_vspace(value)
    raise TypeError(f"Can't find vector space for value {value!r} of type {type(value)}: "
                    "tapead differentiates floats, complex numbers, float/complex arrays "
                    "and tuples/lists/dicts of them")


def _array_vspace(x):
    if x.dtype.kind == "c":
        return ComplexArrayVSpace(x)
    if x.dtype.kind == "f":
        return ArrayVSpace(x)
    raise TypeError(f"Can't find vector space for an array of dtype {x.dtype}: tapead "
                    "differentiates floating-point and complex arrays")


VSpace.register(np.ndarray, _array_vspace)
for _t in (float, np.longdouble, np.float64, np.float32, np.float16):
    VSpace.register(_t, ArrayVSpace)
for _t in (complex, np.clongdouble, np.complex64, np.complex128):
    VSpace.register(_t, ComplexArrayVSpace)
for _t in (tuple, list, dict):
    VSpace.register(_t, ContainerVSpace)
del _t


# -------------------- autograd's old rule methods --------------------

_DEPRECATED = ("{} is deprecated in autograd; use tapead.autograd.extend.defvjp(fun, "
               "maker, ...) with maker(ans, *args) -> (lambda g: cotangent)")


def primitive_with_deprecation_warnings(f_raw):
    """``primitive(f_raw)`` with autograd's pre-1.2 methods ``f.defvjp``,
    ``f.defgrad`` and ``f.defvjp_is_zero`` (each warns, as in autograd)."""
    f = _primitive(f_raw)
    makers = {}

    def register(argnum, maker):
        makers[argnum] = maker
        nums = sorted(makers)
        defvjp(f, *[makers[k] for k in nums], argnums=nums)

    def old_defvjp(vjpmaker, argnum=0):
        warnings.warn(_DEPRECATED.format("defvjp"))

        def maker(ans, *args, **kwargs):
            return lambda g: vjpmaker(g, ans, vspace(args[argnum]), vspace(g), *args, **kwargs)
        register(argnum, maker)

    def defgrad(gradfun, argnum=0):
        warnings.warn(_DEPRECATED.format("defgrad"))
        register(argnum, gradfun)

    def defvjp_is_zero(argnums=(0,)):
        warnings.warn(_DEPRECATED.format("defvjp_is_zero"))
        for a in argnums:
            register(a, None)

    f.defvjp, f.defgrad, f.defvjp_is_zero = old_defvjp, defgrad, defvjp_is_zero
    return f


#: autograd.core.primitive carries the old methods
primitive = primitive_with_deprecation_warnings
