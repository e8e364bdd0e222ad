"""Boxing a transform's inputs and unboxing its outputs.

What every functional transform shares: argument numbers, the check that an
input leaf is differentiable (``check_leaf``), and the conversion of traced
outputs and aux values back to the user's numpy values and containers
(``unbox_out``, ``plain``, ``pack_outputs``, ``split_aux``).  The recording
itself is ``tapead.program.Program``.
"""
from __future__ import annotations

import functools
from typing import Sequence, Tuple, Union

import numpy as np

from tapead import _core
from tapead.numpy import _protocol  # noqa: F401  (installs the numpy protocol of boxes)
from tapead._core import Box, Dual, Tracer
from tapead._prims.construct import pack_objects
from tapead._tree import tree_flatten, tree_unflatten
from tapead.errors import NonDifferentiableError, NonScalarOutputError

__all__ = ["ArgNums", "Where", "pooled"] + [
    "normalize_argnums", "normalize_argnums_checked", "as_result", "check_kinds", "check_leaf",
    "check_scalar_output", "concrete_tree", "pack_outputs", "plain", "seed_like", "split_aux",
    "unbox_out", "zeros_like"]

ArgNums = Union[int, Sequence[int]]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

class Where:
    """'grad: argument 0', formatted only when an error message needs it."""

    __slots__ = ("name", "arg")

    def __init__(self, name, arg):
        self.name, self.arg = name, arg

    def __str__(self):
        return f"{self.name}: argument {self.arg}"

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def pooled(fn):
    """``fn`` with numpy allocating through tapead's memory pool while it runs
    (``_core.pooled``: the intermediates of one call reuse the memory the
    last call freed instead of faulting in fresh pages)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _core.pooled():
            return fn(*args, **kwargs)
    return run


def check_leaf(x, what, complex_ok=False):
    """Validate a differentiable input leaf; returns it as float or array
    (complex numbers and arrays too when ``complex_ok``)."""
    if type(x) is float:
        return x
    if type(x) is np.ndarray and x.ndim and x.dtype.kind == "f":
        return x
    if isinstance(x, Box):
        return x
    if isinstance(x, (complex, np.complexfloating)) or (
            isinstance(x, np.ndarray) and x.dtype.kind == "c"):
        if complex_ok:
            return x
        name = str(what).split(":")[0]
        hint = (" unless holomorphic=True (for holomorphic functions)"
                if name in ("grad", "jacfwd", "jacrev") else "")
        raise TypeError(
            f"{what}: got a complex input ({np.result_type(x)}); {name} needs real "
            f"inputs{hint}. For a real-valued function of complex z, differentiate "
            "f(x + 1j*y) with respect to the real x and y, or use ta.vjp / ta.jvp "
            "(JAX's convention)")
    if isinstance(x, bool) or (isinstance(x, np.ndarray) and x.dtype == bool):
        raise TypeError(f"{what}: got a boolean input; derivatives need float inputs")
    if isinstance(x, int):
        return float(x)
    if isinstance(x, float):
        return x
    if isinstance(x, (np.floating, np.ndarray)):
        arr = np.asarray(x)
        if not np.issubdtype(arr.dtype, np.floating):
            raise TypeError(
                f"{what}: input of dtype {arr.dtype} is not differentiable; "
                "pass a float array (e.g. x.astype(float))")
        if arr.ndim == 0 and arr.dtype == np.float64:
            return float(arr)
        return arr if isinstance(x, np.ndarray) else x
    raise TypeError(f"{what}: cannot differentiate with respect to a "
                    f"{type(x).__name__}; pass floats or float numpy arrays, or pytrees "
                    "of them (tuples, lists, dicts, namedtuples, dataclasses); register "
                    "your own container class with ta.tree_util.register_pytree_node")


@functools.lru_cache(maxsize=256)
def _argnums_cached(argnums, nargs):
    return normalize_argnums_checked(argnums, nargs)


def normalize_argnums(argnums: ArgNums, nargs: int) -> Tuple[Tuple[int, ...], bool]:
    """(normalised argument positions, whether a single int was given)."""
    if isinstance(argnums, (int, tuple)):
        return _argnums_cached(argnums, nargs)
    return normalize_argnums_checked(argnums, nargs)


def normalize_argnums_checked(argnums, nargs):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"argnums {a} is out of range for a call with {nargs} "
                             "positional arguments")
    return tuple(a % nargs for a in nums), single


def zeros_like(x):
    if type(x) is _core.Batched:      # one lane's zeros: every lane shares them
        return np.zeros(_core.shape_of(x), dtype=np.result_type(_core.lanes_of(x)))
    if isinstance(x, Box):
        x = _core.primal_of(x)
        return zeros_like(x)
    if isinstance(x, float):
        return np.float64(0.0)
    return np.zeros(np.shape(x), dtype=np.result_type(x))


def as_result(g, like):
    """Bring an adjoint/tangent to the input's type: numpy, same dtype."""
    if type(g) is float and type(like) is float:
        return np.float64(g)
    if type(g) is np.ndarray and type(like) is np.ndarray and g.dtype == like.dtype \
            and g.shape == like.shape:
        return g
    if g is None:
        return zeros_like(like)
    dtype = np.result_type(_core.lanes_of(like))
    if dtype.kind != "c" and _core.is_complex(g):
        raise NonDifferentiableError(
            "a derivative of a real value came out complex (casting it to real would "
            "drop its imaginary part); some operation lacks a correct complex rule. "
            "Take np.real explicitly where the computation goes back to real values")
    if isinstance(g, Box):          # traced by an outer transform: cast on its trace
        if np.result_type(_core.lanes_of(g)) != dtype and np.issubdtype(dtype, np.inexact):
            from tapead._prims.elementwise import astype  # local: traced values only
            return astype(g, dtype)
        return g
    if np.ndim(g) == 0 and len(_core.shape_of(like)) == 0:
        return dtype.type(g)
    out = np.asarray(g, dtype=dtype)
    shape = tuple(_core.shape_of(like))
    if out.shape != shape:
        out = np.broadcast_to(out, shape).copy()
    return out


def unbox_out(x, trace):
    """The value of an output at this trace's level (lower boxes stay)."""
    if type(x) is Tracer and x.tape is trace:
        return x.primal
    if type(x) is Dual and x.ftrace is trace:
        return x.primal
    return x


def plain(x):
    if isinstance(x, Box):
        return x
    if isinstance(x, float) and not isinstance(x, np.floating):
        return np.float64(x)
    return x


def pack_outputs(out):
    """A function's output with numpy object arrays of tracers (``np.array([a, b])``
    of traced scalars) packed into traced arrays."""
    if type(out) is Tracer or type(out) is Dual or type(out) is float:
        return out
    if type(out) is np.ndarray:
        return pack_objects(out) if out.dtype == object else out
    leaves, td = tree_flatten(out)
    if not any(type(x) is np.ndarray and x.dtype == object for x in leaves):
        return out
    return tree_unflatten(td, [pack_objects(x) if type(x) is np.ndarray and x.dtype == object
                               else x for x in leaves])


def concrete_tree(tree, trace):
    """``tree`` with this trace's boxes replaced by their values (so nothing traced
    escapes a transform): auxiliary data and other pass-through outputs."""
    tree = pack_outputs(tree)
    leaves, td = tree_flatten(tree)
    if not any(isinstance(x, Box) for x in leaves):
        return tree
    return tree_unflatten(td, [plain(unbox_out(x, trace)) for x in leaves])


def split_aux(out, name):
    if not (isinstance(out, tuple) and len(out) == 2):
        got = (f"a tuple of {len(out)}" if isinstance(out, tuple)
               else f"a {type(out).__name__}")
        raise TypeError(f"{name}(has_aux=True): the function must return a pair "
                        f"(output, auxiliary data); it returned {got}")
    return out


def check_scalar_output(out, name, has_aux, holomorphic=False):
    """Explain an output grad cannot differentiate: None, a container, a bool or
    integer, a non-scalar."""
    if out is None:
        raise TypeError(f"{name}: the function returned None; it must return a real "
                        "scalar (a missing `return` statement?)")
    if isinstance(out, (tuple, list, dict)) and not has_aux:
        raise TypeError(
            f"{name}: the function returned a {type(out).__name__} of {len(out)} "
            f"values; {name} needs a single real floating-point scalar. If the other "
            f"values are auxiliary data, return (value, aux) and pass has_aux=True; "
            "for several outputs use ta.jacrev or ta.vjp")
    value = _core.lanes_of(out) if isinstance(out, Box) else out     # dtype and shape only
    try:
        dtype = np.result_type(value)
    except TypeError:
        raise TypeError(f"{name}: the function returned a {type(out).__name__}; it must "
                        "return a real floating-point scalar") from None
    if dtype.kind in "biu":
        raise TypeError(
            f"{name}: the function's output has dtype {dtype} "
            f"({'a bool' if dtype.kind == 'b' else 'an integer'}); {name} needs a real "
            "floating-point scalar output, whose derivative is defined. Return a float "
            "(e.g. the quantity before comparing or rounding it)")
    shape = _core.shape_of(out) if isinstance(out, Box) else np.shape(value)
    if shape != ():
        raise NonScalarOutputError(
            f"{name} needs a function with a scalar output, got shape {shape}; "
            "use ta.jacrev / ta.vjp for vector outputs or reduce the output (e.g. .sum())")


def check_kinds(name, holomorphic, leaves=None, outs=None, real_outs=True):
    """JAX's rules for complex values: without ``holomorphic``, inputs (and, for
    reverse mode, outputs) must be real; with it, both must be complex."""
    for x in leaves or ():
        if holomorphic and not _core.is_complex(x):
            raise TypeError(f"{name} with holomorphic=True needs complex inputs, got "
                            f"{np.result_type(_core.lanes_of(x))}; pass complex values "
                            "(e.g. x + 0j) or drop holomorphic=True")
    for y in outs or ():
        cx = _core.is_complex(y)
        if holomorphic and not cx:
            raise TypeError(f"{name} with holomorphic=True needs a complex-valued "
                            f"function, got an output of dtype "
                            f"{np.result_type(_core.lanes_of(y))}; drop holomorphic=True "
                            "for real-valued functions")
        if cx and real_outs and not holomorphic:
            raise TypeError(f"{name} requires real-valued outputs, got "
                            f"{np.result_type(_core.lanes_of(y))}. Pass holomorphic=True "
                            "for a holomorphic function, take np.real / np.abs of the "
                            "output, or use ta.vjp for other complex outputs")


def seed_like(c, v):
    """A cotangent seed in the output's kind: real seeds of complex outputs
    become complex; complex seeds of real outputs are refused."""
    if _core.is_complex(c) and not _core.is_complex(v):
        raise TypeError(f"pullback: complex cotangent for a real output (dtype "
                        f"{np.result_type(_core.lanes_of(v))}); pass a real cotangent")
    if _core.is_complex(v) and not _core.is_complex(c) and not isinstance(c, Box):
        return np.asarray(c, dtype=np.result_type(_core.lanes_of(v)))[()] \
            if np.ndim(c) == 0 else np.asarray(c, dtype=np.result_type(_core.lanes_of(v)))
    return c
