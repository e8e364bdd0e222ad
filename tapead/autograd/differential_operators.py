"""autograd's differential operators, on tapead's transforms.

Each takes ``(fun, argnum=0)`` and returns a function of ``fun``'s
arguments (``argnum`` an int, or a tuple of ints: then the derivative is a
tuple), keyword arguments passed through to ``fun``, as in autograd.
"""
from __future__ import annotations

import inspect
import warnings
from collections import OrderedDict

import numpy as np

from tapead import _core
from tapead import numpy as tnp
from tapead.autograd.core import make_jvp as _make_jvp
from tapead.autograd.core import make_vjp as _make_vjp
from tapead.autograd.core import vspace
from tapead.autograd.wrap_util import unary_to_nary
from tapead.loops import checkpoint as _checkpoint

__all__ = ["grad", "value_and_grad", "grad_and_aux", "elementwise_grad", "deriv", "jacobian",
           "holomorphic_grad", "grad_named", "hessian", "make_hvp", "hessian_tensor_product",
           "hessian_vector_product", "tensor_jacobian_product", "vector_jacobian_product",
           "make_jvp_reversemode", "make_ggnvp", "multigrad_dict", "checkpoint",
           "make_vjp", "make_jvp"]

make_vjp = unary_to_nary(_make_vjp)
make_jvp = unary_to_nary(_make_jvp)


def _scalar_output(ans, name):
    """The cotangent 1 for a one-element real output; a TypeError otherwise
    (a complex output counts as two elements, as in autograd)."""
    try:
        vs = vspace(ans)
    except TypeError:
        vs = None
    if vs is None or vs.size != 1 or isinstance(ans, (tuple, list, dict)):
        raise TypeError(f"{name} only applies to real scalar-output functions (got "
                        f"{type(ans).__name__}{'' if vs is None else ' of shape ' + str(vs.shape)}"
                        "). Try jacobian, elementwise_grad or holomorphic_grad.")
    return np.ones(vs.shape, dtype=vs.dtype) if vs.shape else vs.dtype.type(1)


@unary_to_nary
def grad(fun, x):
    """
    Returns a function which computes the gradient of ``fun`` with respect to
    positional argument number ``argnum`` (an int, or a tuple of ints for a
    tuple of gradients). The returned function takes the same arguments as
    ``fun``; ``fun`` must have a real output of one element. The gradient is
    shaped like the argument (numpy values)."""
    vjp, ans = _make_vjp(fun, x)
    return vjp(_scalar_output(ans, "grad"))


@unary_to_nary
def value_and_grad(fun, x):
    """``(fun(...), grad(fun)(...))`` from one run of ``fun``."""
    vjp, ans = _make_vjp(fun, x)
    return ans, vjp(_scalar_output(ans, "value_and_grad"))


@unary_to_nary
def grad_and_aux(fun, x):
    """``fun`` returns ``(value, aux)``: ``(grad of value, aux)``."""
    box = {}

    def value(x):
        out = fun(x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("grad_and_aux: the function must return a pair (value, aux)")
        box["aux"] = out[1]
        return out[0]
    vjp, ans = _make_vjp(value, x)
    return vjp(_scalar_output(ans, "grad_and_aux")), _core_concrete_tree(box["aux"])


def _core_concrete_tree(x):
    if isinstance(x, _core.Box):
        return _core.concrete(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_core_concrete_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _core_concrete_tree(v) for k, v in x.items()}
    return x


@unary_to_nary
def elementwise_grad(fun, x):
    """The sum of the Jacobian's rows, in one reverse pass (the derivative of
    each element when ``fun`` acts elementwise)."""
    vjp, ans = _make_vjp(fun, x)
    vs = vspace(ans)
    if vs.iscomplex:
        raise TypeError("Elementwise_grad only applies to real-output functions.")
    return vjp(vs.ones())


@unary_to_nary
def deriv(fun, x):
    """``J · 1``: the derivative along the all-ones direction (forward mode)."""
    return _make_jvp(fun, x)(vspace(x).ones())[1]


@unary_to_nary
def jacobian(fun, x):
    """The Jacobian, shaped ``out.shape + in.shape`` (reverse mode, one pullback
    per output element); ``x`` is a number or an array."""
    vjp, ans = _make_vjp(fun, x)
    out_vs, in_vs = vspace(ans), vspace(x)
    shape = out_vs.shape + in_vs.shape
    rows = [vjp(e) for e in out_vs.standard_basis()]
    if not rows:
        return np.zeros(shape, dtype=in_vs.dtype)
    if any(isinstance(r, _core.Box) for r in rows):
        return tnp.reshape(tnp.stack(rows), shape)
    return np.reshape(np.stack(rows), shape)


@unary_to_nary
def holomorphic_grad(fun, x):
    """``f'(z)`` of a holomorphic ``fun`` (the gradient of ``real(fun)``)."""
    if not vspace(x).iscomplex:
        warnings.warn("Input to holomorphic_grad is not complex")
    return grad(lambda x: tnp.real(fun(x)))(x)


def grad_named(fun, argname):
    """The gradient with respect to the argument named ``argname`` (not ``*args``
    or ``**kwargs``)."""
    return grad(fun, inspect.getfullargspec(fun).args.index(argname))


@unary_to_nary
def hessian(fun, x):
    """The Hessian, shaped ``out.shape + in.shape + in.shape``."""
    return jacobian(jacobian(fun))(x)


@unary_to_nary
def make_hvp(fun, x):
    """``(hvp, grad(fun)(x))``: ``hvp(v)`` is the Hessian times ``v`` at ``x``, the
    forward pass done once for many products."""
    return _make_vjp(grad(fun), x)


def hessian_tensor_product(fun, argnum=0):
    """``(*args, tensor) -> H · tensor``, the Hessian of ``fun`` in argument ``argnum``
    contracted with ``tensor`` over its dimensions (forward over reverse)."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return tnp.tensordot(fun_grad(*args, **kwargs), vector, np.ndim(vector))
    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    """``(*args, tensor) -> tensor · J``: the Jacobian left-multiplied by ``tensor``."""
    def vector_dot_fun(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return tnp.tensordot(vector, fun(*args, **kwargs), axes=np.ndim(vector))
    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


@unary_to_nary
def make_jvp_reversemode(fun, x):
    """A JVP from two reverse passes (the VJP's VJP, linear in its argument)."""
    vjp, y = _make_vjp(fun, x)
    vjp_vjp, _ = _make_vjp(vjp, vspace(y).zeros())
    return vjp_vjp


def make_ggnvp(f, g=lambda x: 1.0 / 2 * tnp.sum(x ** 2, axis=-1), f_argnum=0):
    """Generalized Gauss-Newton-vector products ``J^T H_g J v`` of ``g(f(x))``."""
    @unary_to_nary
    def _make_ggnvp(f, x):
        f_vjp, f_x = _make_vjp(f, x)
        g_hvp, grad_g_x = _make_vjp(grad(g), f_x)
        f_jvp, _ = _make_vjp(f_vjp, vspace(grad_g_x).zeros())

        def ggnvp(v):
            return f_vjp(g_hvp(f_jvp(v)))
        return ggnvp
    return _make_ggnvp(f, f_argnum)


def multigrad_dict(fun):
    """The gradient with respect to every argument at once, as an ``OrderedDict``
    ``{argument name: gradient}`` (defaults included)."""
    sig = inspect.signature(fun)
    params = sig.parameters
    var_pos = [n for n, p in params.items() if p.kind == p.VAR_POSITIONAL]
    var_kwd = [n for n, p in params.items() if p.kind == p.VAR_KEYWORD]

    def gradfun(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        argdict = OrderedDict(bound.arguments)

        def newfun(dct):
            pos = [dct[n] for n in params if n not in var_pos + var_kwd
                   and params[n].kind != params[n].KEYWORD_ONLY]
            extra = tuple(dct[var_pos[0]]) if var_pos else ()
            kw = {n: dct[n] for n in params if params[n].kind == params[n].KEYWORD_ONLY}
            if var_kwd:
                kw.update(dct[var_kwd[0]])
            return fun(*pos, *extra, **kw)
        g = grad(newfun)(dict(argdict))
        return OrderedDict((name, g[name]) for name in argdict)
    return gradfun


def checkpoint(fun):
    """``fun`` whose intermediate values are recomputed in the backward pass
    rather than stored (tapead's ``checkpoint``; keyword arguments are not
    traced)."""
    def wrapped(*args, **kwargs):
        if kwargs:
            return _checkpoint(lambda *a: fun(*a, **kwargs))(*args)
        return inner(*args)
    inner = _checkpoint(fun)
    wrapped.__name__ = getattr(fun, "__name__", "checkpointed")
    wrapped.__doc__ = getattr(fun, "__doc__", None)
    return wrapped
