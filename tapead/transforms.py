"""The functional transforms: grad, jvp, vjp, jacobians, hvp, record.

Each transform starts a trace (a ``Tape`` for reverse mode, a
``ForwardTrace`` for dual numbers) with a fresh level, boxes the inputs,
runs the user's Python function eagerly and reads the derivative off.
"""
from __future__ import annotations

import functools
import threading
from typing import Callable, Sequence, Tuple, Union

import numpy as np

from tapead import _core, _prims  # noqa: F401  (_prims installs the rules)
from tapead._core import Box, Dual, ForwardTrace, Tape, Tracer, shape_of
from tapead._prims.construct import pack_objects
from tapead._prims.elementwise import stop_gradient  # noqa: F401  (re-exported)
from tapead._tree import tree_flatten, tree_unflatten
from tapead.errors import (NonDifferentiableError, NonScalarOutputError, ShapeError,
                           TapeReplayError)

__all__ = ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian",
           "hvp", "record", "Recording", "stop_gradient"]

ArgNums = Union[int, Sequence[int]]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

class _Where:
    """'grad: argument 0', formatted only when an error message needs it."""

    __slots__ = ("name", "arg")

    def __init__(self, name, arg):
        self.name, self.arg = name, arg

    def __str__(self):
        return f"{self.name}: argument {self.arg}"

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def _check_leaf(x, what, complex_ok=False):
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
    return _argnums_checked(argnums, nargs)


def _argnums(argnums: ArgNums, nargs: int) -> Tuple[Tuple[int, ...], bool]:
    """(normalised argument positions, whether a single int was given)."""
    if isinstance(argnums, (int, tuple)):
        return _argnums_cached(argnums, nargs)
    return _argnums_checked(argnums, nargs)


def _argnums_checked(argnums, nargs):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"argnums {a} is out of range for a call with {nargs} "
                             "positional arguments")
    return tuple(a % nargs for a in nums), single


def _zeros_like(x):
    if isinstance(x, Box):
        x = _core.primal_of(x)
        return _zeros_like(x)
    if isinstance(x, float):
        return np.float64(0.0)
    return np.zeros(np.shape(x), dtype=np.result_type(x))


def _as_result(g, like):
    """Bring an adjoint/tangent to the input's type: numpy, same dtype."""
    if type(g) is float and type(like) is float:
        return np.float64(g)
    if type(g) is np.ndarray and type(like) is np.ndarray and g.dtype == like.dtype \
            and g.shape == like.shape:
        return g
    if g is None:
        return _zeros_like(like)
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


def _unbox_out(x, trace):
    """The value of an output at this trace's level (lower boxes stay)."""
    if type(x) is Tracer and x.tape is trace:
        return x.primal
    if type(x) is Dual and x.ftrace is trace:
        return x.primal
    return x


def _plain(x):
    if isinstance(x, Box):
        return x
    if isinstance(x, float) and not isinstance(x, np.floating):
        return np.float64(x)
    return x


def _pack_outputs(out):
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


def _concrete_tree(tree, trace):
    """``tree`` with this trace's boxes replaced by their values (so nothing traced
    escapes a transform): auxiliary data and other pass-through outputs."""
    tree = _pack_outputs(tree)
    leaves, td = tree_flatten(tree)
    if not any(isinstance(x, Box) for x in leaves):
        return tree
    return tree_unflatten(td, [_plain(_unbox_out(x, trace)) for x in leaves])


def _split_aux(out, name):
    if not (isinstance(out, tuple) and len(out) == 2):
        got = (f"a tuple of {len(out)}" if isinstance(out, tuple)
               else f"a {type(out).__name__}")
        raise TypeError(f"{name}(has_aux=True): the function must return a pair "
                        f"(output, auxiliary data); it returned {got}")
    return out


def _check_scalar_output(out, name, has_aux, holomorphic=False):
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


def _check_kinds(name, holomorphic, leaves=None, outs=None, real_outs=True):
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


def _seed_like(c, v):
    """A cotangent seed in the output's kind: real seeds of complex outputs
    become complex; complex seeds of real outputs are refused."""
    if _core.is_complex(c) and not _core.is_complex(v):
        raise TypeError(f"pullback: complex cotangent for a real output (dtype "
                        f"{np.result_type(_core.lanes_of(v))}); pass a real cotangent")
    if _core.is_complex(v) and not _core.is_complex(c) and not isinstance(c, Box):
        return np.asarray(c, dtype=np.result_type(_core.lanes_of(v)))[()] \
            if np.ndim(c) == 0 else np.asarray(c, dtype=np.result_type(_core.lanes_of(v)))
    return c


# ---------------------------------------------------------------------------
# reverse mode
# ---------------------------------------------------------------------------

def _record(f, args, kwargs, argnums, name, complex_ok=False):
    """Run f with the argnums inputs boxed on a new tape."""
    nums, single = _argnums(argnums, len(args))
    tape = Tape()
    boxed = list(args)
    in_leaves, in_trees, in_ids = [], [], []
    try:
        for a in nums:
            leaves, td = tree_flatten(args[a])
            if not td.all_float:
                what = _Where(name, a)
                leaves = [x if type(x) is np.ndarray and x.ndim and x.dtype.kind == "f"
                          else _check_leaf(x, what, complex_ok) for x in leaves]
            start = tape.n_nodes
            tracers = tape.input_many(leaves)
            in_leaves.append(leaves)
            in_trees.append(td)
            in_ids.append(range(start, start + len(leaves)) if td.all_float else
                          tape.inputs[len(tape.inputs) - len(leaves):])
            boxed[a] = tree_unflatten(td, tracers)
        out = _pack_outputs(f(*boxed, **kwargs))
    finally:
        tape.active = False
    return tape, out, nums, single, in_leaves, in_trees, in_ids


def _grads(tape, outputs, seeds, in_leaves, in_trees, in_ids, single):
    flat_ids = in_ids[0] if len(in_ids) == 1 else [i for ids in in_ids for i in ids]
    adjs = (tape.backward(outputs, seeds, flat_ids, dense=True) if outputs
            else [None] * len(flat_ids))
    result, k = [], 0
    for leaves, td in zip(in_leaves, in_trees):
        n = len(leaves)
        if getattr(td, "all_float", False) and isinstance(adjs, np.ndarray):
            gs = list(adjs[k:k + n])     # numpy float64 scalars
        else:
            if isinstance(adjs, np.ndarray):
                adjs = list(adjs)
            gs = [a if type(a) is np.ndarray and type(x) is np.ndarray and a.dtype == x.dtype
                  and a.shape == x.shape else _as_result(a, x)
                  for a, x in zip(adjs[k:k + n], leaves)]
        k += len(leaves)
        result.append(tree_unflatten(td, gs))
    return result[0] if single else tuple(result)


def value_and_grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """``f``'s value and gradient, in one forward run and one reverse sweep.

    Parameters
    ----------
    f : callable
        Returns a scalar, shape ``()`` (or ``(scalar, aux)`` with
        ``has_aux``).
    argnums : int or tuple of int
        Positional arguments to differentiate (each a float, a float array or
        a pytree of them).
    has_aux : bool
        ``f`` returns ``(value, aux)``; only ``value`` is differentiated and
        ``aux`` comes back as values (nothing traced escapes).
    holomorphic : bool
        ``f`` is a holomorphic function of complex inputs with a complex
        output: the gradient is the complex derivative ``f'(z)`` (as JAX).
        Without it, inputs and output must be real.

    Returns
    -------
    callable
        Takes ``f``'s arguments and returns ``(value, grad)``, or
        ``((value, aux), grad)`` with ``has_aux``.  ``value`` is a numpy
        scalar; ``grad`` has the structure, shapes and dtypes of the
        differentiated argument (a tuple of them when ``argnums`` is a
        tuple).

    Raises
    ------
    NonScalarOutputError
        ``f`` returned an array with more than one element (use ``jacrev``).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> value, g = ta.value_and_grad(lambda x: (x ** 2).sum())(np.array([1.0, 2.0]))
    >>> print(value, g)
    5.0 [2. 4.]
    >>> (value, aux), g = ta.value_and_grad(lambda x: (3.0 * x, "note"), has_aux=True)(2.0)
    >>> print(value, aux, g)
    6.0 note 3.0
    """
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "grad", holomorphic)
        if holomorphic:
            _check_kinds("grad", True, [x for leaves in in_leaves for x in leaves])
        if has_aux:
            out, aux = _split_aux(out, "grad")
        if holomorphic or not (type(out) is Tracer and type(out.primal) is float):
            _check_scalar_output(out, "grad", has_aux, holomorphic)
            if holomorphic or _core.is_complex(out):
                _check_kinds("grad", holomorphic, outs=[out])
        if type(out) is Tracer and out.tape is tape:
            outputs, seeds = [out.idx], [1.0 if not holomorphic else 1.0 + 0j]
        else:
            outputs, seeds = [], []
        g = _grads(tape, outputs, seeds, in_leaves, in_trees, in_ids, single)
        value = _plain(_unbox_out(out, tape))
        if has_aux:
            return (value, _concrete_tree(aux, tape)), g
        return value, g
    # ta.jit recognises this wrapper and replays f's tape with one reverse sweep
    value_and_grad_f._tapead_grad = (f, argnums, has_aux, holomorphic, "value_and_grad",
                                     value_and_grad_f)
    return value_and_grad_f


def grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """Gradient of a scalar function (reverse mode, one sweep).

    Parameters
    ----------
    f : callable
        Returns a scalar, shape ``()`` (or ``(scalar, aux)`` with
        ``has_aux``).
    argnums : int or tuple of int
        Positional arguments to differentiate (floats, float arrays or
        pytrees of them).
    has_aux : bool
        ``f`` returns ``(value, aux)``; ``aux`` is returned next to the
        gradient, as values.
    holomorphic : bool
        Differentiate a holomorphic function of complex inputs: the result is
        ``f'(z)`` (see ``value_and_grad``).

    Returns
    -------
    callable
        Takes ``f``'s arguments and returns the gradient, shaped like the
        differentiated argument (a tuple for a tuple ``argnums``), or
        ``(grad, aux)`` with ``has_aux``.

    See Also
    --------
    value_and_grad : the value too, at no extra cost.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> float(ta.grad(lambda x: x * x + 3.0 * x)(2.0))
    7.0
    >>> gx, gy = ta.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(np.ones(2), np.arange(2.0))
    >>> print(gx, gy)
    [0. 1.] [1. 1.]
    >>> complex(ta.grad(lambda z: z * z, holomorphic=True)(1.0 + 2.0j))
    (2+4j)
    """
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]
    grad_f._tapead_grad = (f, argnums, has_aux, holomorphic, "grad", grad_f)  # for ta.jit
    return grad_f


def vjp(f: Callable, *primals, has_aux: bool = False):
    """Reverse mode: ``f``'s output and a function that pulls cotangents back.

    Parameters
    ----------
    f : callable
        Any function of the primals returning an array or a pytree of arrays.
    *primals
        The point: floats, float arrays or pytrees of them.
    has_aux : bool
        ``f`` returns ``(out, aux)``; ``aux`` is returned as a third value.

    Returns
    -------
    out : pytree
        ``f(*primals)`` as plain numpy values.
    pullback : callable
        ``pullback(ct)`` with ``ct`` shaped like ``out`` returns a tuple with
        one cotangent ``ct @ J_i`` per primal, each shaped like that primal.
        It can be called several times.
    aux : object
        Only with ``has_aux``.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> out, pullback = ta.vjp(lambda x: x * x, np.array([1.0, 2.0, 3.0]))
    >>> print(out, pullback(np.array([1.0, 0.0, 1.0])))
    [1. 4. 9.] (array([2., 0., 6.]),)
    """
    tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
        f, primals, {}, tuple(range(len(primals))), "vjp", True)
    if has_aux:
        out, aux = _split_aux(out, "vjp")
        aux = _concrete_tree(aux, tape)
    out_leaves, out_tree = tree_flatten(out)
    values = [_plain(_unbox_out(x, tape)) for x in out_leaves]

    def pullback(cotangent):
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if len(ct_leaves) != len(out_leaves):
            raise ShapeError(f"pullback: the cotangent has {len(ct_leaves)} leaves but "
                             f"the output has {len(out_leaves)}; pass one per output")
        outputs, seeds = [], []
        for x, v, c in zip(out_leaves, values, ct_leaves):
            if np.shape(c) != np.shape(v):
                raise ShapeError(f"pullback: cotangent of shape {np.shape(c)} for an "
                                 f"output of shape {np.shape(v)}; they must match")
            c = _seed_like(c, v)
            if type(x) is Tracer and x.tape is tape:
                outputs.append(x.idx)
                seeds.append(float(c) if np.ndim(c) == 0 and isinstance(
                    c, (float, int, np.float64)) else c)
        return _grads(tape, outputs, seeds, in_leaves, in_trees, in_ids, False)

    out_val = tree_unflatten(out_tree, values)
    if has_aux:
        return out_val, pullback, aux
    return out_val, pullback


# ---------------------------------------------------------------------------
# forward mode (dual numbers)
# ---------------------------------------------------------------------------

def jvp(f: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """Forward mode: ``(f(*primals), J·tangents)`` by dual numbers, in one run.

    Parameters
    ----------
    f : callable
        Any function of the primals returning an array or a pytree of arrays.
    primals : tuple
        One entry per positional argument of ``f`` (floats, float arrays or
        pytrees of them).
    tangents : tuple
        The direction: same structure and shapes as ``primals``.
    has_aux : bool
        ``f`` returns ``(output, aux)``; the aux data comes back as values.

    Returns
    -------
    out : pytree
        ``f(*primals)``.
    tangent_out : pytree
        The directional derivative ``J·tangents``, shaped like ``out``.
    aux : pytree
        Only with ``has_aux=True`` (then the result is ``(out, tangent_out, aux)``,
        as in JAX).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> out, t = ta.jvp(lambda x, y: x * y, (np.array([1.0, 2.0]), 3.0), (np.ones(2), 0.0))
    >>> print(out, t)
    [3. 6.] [3. 3.]
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp(f, primals, tangents): primals and tangents must be "
                        "tuples (one entry per positional argument)")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ShapeError("jvp: primals and tangents must have the same structure")
    trace = ForwardTrace()
    duals = []
    try:
        for p, t in zip(p_leaves, t_leaves):
            p = _check_leaf(p, "jvp", True)
            if _core.is_complex(p) != _core.is_complex(t):
                raise TypeError(
                    f"jvp: a {'complex' if _core.is_complex(p) else 'real'} primal needs a "
                    f"{'complex' if _core.is_complex(p) else 'real'} tangent, got dtype "
                    f"{np.result_type(_core.lanes_of(t))}; make the tangent's dtype match")
            if np.shape(p) != np.shape(t):
                raise ShapeError(f"jvp: tangent of shape {np.shape(t)} for a primal of "
                                 f"shape {np.shape(p)}; they must match")
            if isinstance(t, int) and not isinstance(t, bool):
                t = float(t)
            duals.append(trace.input(p, t))
        out = f(*tree_unflatten(p_tree, duals))
        if has_aux:
            out, aux = _split_aux(out, "jvp")
            aux = _concrete_tree(aux, trace)
        out = _pack_outputs(out)
    finally:
        trace.active = False
    o_leaves, o_tree = tree_flatten(out)
    vals, tans = [], []
    for x in o_leaves:
        if type(x) is Dual and x.ftrace is trace:
            vals.append(_plain(x.primal))
            tans.append(_plain(_as_result(x.tangent, x.primal) if not isinstance(
                x.tangent, Box) else x.tangent))
        else:
            vals.append(_plain(x))
            tans.append(_zeros_like(x))
    if has_aux:
        return tree_unflatten(o_tree, vals), tree_unflatten(o_tree, tans), aux
    return tree_unflatten(o_tree, vals), tree_unflatten(o_tree, tans)


# ---------------------------------------------------------------------------
# Jacobians and Hessians
# ---------------------------------------------------------------------------

def _per_argument(blocks, in_leaves, in_trees, single):
    """Regroup flat per-leaf blocks into the structure of the differentiated arguments."""
    per_arg, k = [], 0
    for leaves, td in zip(in_leaves, in_trees):
        per_arg.append(tree_unflatten(td, blocks[k:k + len(leaves)]))
        k += len(leaves)
    return per_arg[0] if single else tuple(per_arg)


def jacfwd(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Jacobian by forward mode: one recording, all input directions at once.

    The tape is recorded once and a batched forward sweep carries one
    tangent direction per input element (an extra leading axis).  Cheapest
    when the input has fewer elements than the output.  Inputs must be real
    (the outputs may be complex) unless ``holomorphic=True``: then inputs and
    outputs are complex and the result is the complex derivative.

    Parameters
    ----------
    f : callable
        A function returning an array or a pytree of arrays.
    argnums : int or tuple of int
        Positional arguments to differentiate.
    has_aux : bool
        ``f`` returns ``(output, aux)``; the result is then ``(jacobian, aux)``
        with the aux data as values.
    holomorphic : bool
        Complex inputs and outputs, complex derivative (as JAX).

    Returns
    -------
    callable
        Takes ``f``'s arguments and returns the Jacobian, shaped
        ``out.shape + in.shape`` (a pytree of them for pytree outputs or
        inputs, a tuple for a tuple ``argnums``).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> J = ta.jacfwd(lambda x: np.array([1.0, 2.0]) * x[0] + x[1] ** 2)(np.array([3.0, 4.0]))
    >>> print(J)
    [[1. 8.]
     [2. 8.]]
    """
    @functools.wraps(f)
    def jac_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "jacfwd", holomorphic)
        if has_aux:
            out, aux = _split_aux(out, "jacfwd")
            aux = _concrete_tree(aux, tape)
        flat_in = [x for leaves in in_leaves for x in leaves]
        if holomorphic:
            _check_kinds("jacfwd", True, flat_in, tree_flatten(out)[0])
        flat_ids = [i for ids in in_ids for i in ids]
        sizes = [int(np.prod(np.shape(x))) for x in flat_in]
        K = int(sum(sizes))
        seeds, off = {}, 0
        for x, nid, m in zip(flat_in, flat_ids, sizes):
            eye = np.zeros((K, m), dtype=np.result_type(_core.lanes_of(x)))
            eye[off:off + m] = np.eye(m)
            seeds[nid] = eye.reshape((K,) + np.shape(x))
            off += m
        out_leaves, out_tree = tree_flatten(out)
        ids = [x.idx if type(x) is Tracer and x.tape is tape else -1 for x in out_leaves]
        tans = tape.forward_sweep(seeds, [i for i in ids if i >= 0], K) if K else []
        tans_iter = iter(tans)
        jac_leaves = []
        for x, i in zip(out_leaves, ids):
            val = _unbox_out(x, tape)
            t = next(tans_iter) if i >= 0 else None
            oshape = np.shape(val)
            if t is None:
                t = np.zeros((K,) + oshape, dtype=np.result_type(_core.lanes_of(val)))
            if isinstance(t, Box):      # tangents traced by an outer transform
                from tapead._prims.shape import moveaxis, reshape  # local: traced values only
            else:
                moveaxis, reshape = np.moveaxis, np.reshape
                t = np.asarray(t, dtype=np.result_type(_core.lanes_of(val)))
            t = reshape(t, (K,) + oshape)
            blocks, off = [], 0
            for xin, m in zip(flat_in, sizes):
                blk = reshape(moveaxis(t[off:off + m], 0, -1), oshape + np.shape(xin))
                blocks.append(blk)
                off += m
            jac_leaves.append(_per_argument(blocks, in_leaves, in_trees, single))
        jac = tree_unflatten(out_tree, jac_leaves)
        return (jac, aux) if has_aux else jac
    jac_f._tapead_jac = (f, argnums, has_aux, holomorphic, "jacfwd", jac_f)   # for ta.vmap
    return jac_f


def jacrev(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Jacobian by reverse mode: one recording, one sweep per output element.

    Cheapest when the output has fewer elements than the input.  Inputs and
    outputs must be real unless ``holomorphic=True``: then both are complex and
    the result is the complex derivative (as JAX).

    Parameters
    ----------
    f : callable
        A function returning an array or a pytree of arrays.
    argnums : int or tuple of int
        Positional arguments to differentiate.
    has_aux : bool
        As in :func:`jacfwd`.
    holomorphic : bool
        As in :func:`jacfwd`.

    Returns
    -------
    callable
        Takes ``f``'s arguments and returns the Jacobian, shaped
        ``out.shape + in.shape``, like :func:`jacfwd`.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> J = ta.jacrev(lambda x: np.sin(x) * x[0])(np.array([0.0, 1.0]))
    >>> print(np.round(J, 6))
    [[0.       0.      ]
     [0.841471 0.      ]]
    """
    @functools.wraps(f)
    def jac_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "jacrev", holomorphic)
        if has_aux:
            out, aux = _split_aux(out, "jacrev")
            aux = _concrete_tree(aux, tape)
        out_leaves, out_tree = tree_flatten(out)
        flat_in = [x for leaves in in_leaves for x in leaves]
        if holomorphic or any(_core.is_complex(y) for y in out_leaves):
            _check_kinds("jacrev", holomorphic, flat_in if holomorphic else None,
                         out_leaves)
        flat_ids = [i for ids in in_ids for i in ids]
        jac_leaves = []
        for x in out_leaves:
            val = _unbox_out(x, tape)
            oshape = np.shape(val)
            rows = []
            for j in range(int(np.prod(oshape))):
                if type(x) is Tracer and x.tape is tape:
                    if oshape == ():
                        seed = 1.0 + 0j if holomorphic else 1.0
                    else:
                        seed = np.zeros(oshape, dtype=np.result_type(_core.lanes_of(val)))
                        seed.flat[j] = 1.0
                    adjs = tape.backward([x.idx], [seed], flat_ids)
                else:
                    adjs = [None] * len(flat_ids)
                rows.append([_as_result(a, xin) for a, xin in zip(adjs, flat_in)])
            blocks = []
            for k, xin in enumerate(flat_in):
                ishape = np.shape(_core.concrete(xin))
                if rows and isinstance(rows[0][k], Box):
                    from tapead._prims.shape import reshape, stack  # local: traced values only
                    blk = reshape(stack([r[k] for r in rows]), oshape + ishape)
                else:
                    dt = np.result_type(_core.lanes_of(xin))
                    blk = (np.stack([np.asarray(r[k]) for r in rows]).reshape(oshape + ishape)
                           if rows else np.zeros(oshape + ishape, dtype=dt))
                blocks.append(blk)
            jac_leaves.append(_per_argument(blocks, in_leaves, in_trees, single))
        jac = tree_unflatten(out_tree, jac_leaves)
        return (jac, aux) if has_aux else jac
    jac_f._tapead_jac = (f, argnums, has_aux, holomorphic, "jacrev", jac_f)   # for ta.vmap
    return jac_f


def hessian(f: Callable, argnums: ArgNums = 0, holomorphic: bool = False) -> Callable:
    """Hessian, forward over reverse: ``jacfwd(grad(f))``.

    Parameters
    ----------
    f : callable
        A scalar function.
    argnums : int or tuple of int
        Positional arguments to differentiate.
    holomorphic : bool
        For holomorphic functions of complex inputs (as ``grad``).

    Returns
    -------
    callable
        Takes ``f``'s arguments and returns the Hessian, shaped
        ``in.shape + in.shape`` (for an input of shape ``(n,)``: ``(n, n)``).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> print(ta.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 3.0])))
    [[6. 2.]
     [2. 0.]]
    """
    return jacfwd(grad(f, argnums, holomorphic=holomorphic), argnums,
                  holomorphic=holomorphic)


def hvp(f: Callable, primals: Sequence, tangents: Sequence):
    """Hessian-vector product ``H·v`` by forward over reverse.

    One forward run on dual numbers through one reverse sweep: the tape's
    values are duals, so the gradient's tangent part is ``H·v``.  No
    Hessian is formed.

    Parameters
    ----------
    f : callable
        A scalar function.
    primals : tuple
        The point, one entry per positional argument of ``f``.
    tangents : tuple
        The vector ``v``, same structure and shapes as ``primals``.

    Returns
    -------
    array or tuple
        ``H·v``, shaped like ``primals[0]`` when there is one primal, else a
        tuple with one entry per primal.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> f = lambda x: x[0] ** 2 * x[1]
    >>> print(ta.hvp(f, (np.array([1.0, 3.0]),), (np.array([1.0, 0.0]),)))
    [6. 2.]
    """
    primals, tangents = tuple(primals), tuple(tangents)
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(f, argnums), primals, tangents)[1]


# ---------------------------------------------------------------------------
# recorded tapes
# ---------------------------------------------------------------------------

class Recording:
    """A tape recorded from ``f`` at some inputs, re-evaluable at new ones.

    Made by :func:`record`.  Calling it re-evaluates the recorded tape at
    new inputs of the same structure and shapes without running Python.

    Parameters
    ----------
    f : callable
        A scalar function.
    args : tuple
        The inputs to record at.

    Attributes
    ----------
    tape : Tape
        The recorded tape (``tape.n_nodes``, ``tape.nbytes``,
        ``tape.memory()``).
    n_nodes : int
        Number of nodes on the tape.
    nbytes : int
        Bytes of values the tape holds for the reverse sweep.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> rec = ta.record(lambda x: (x * x).sum(), np.array([1.0, 2.0]))
    >>> print(rec(np.array([3.0, 4.0])))
    25.0
    >>> value, g = rec.value_and_grad(np.array([3.0, 4.0]))
    >>> print(value, g)
    25.0 [6. 8.]
    """

    def __init__(self, f, args):
        self.f = f
        started = _core.traces_started()
        self.tape, out, _, _, self._in_leaves, self._in_trees, self._in_ids = _record(
            f, args, {}, tuple(range(len(args))), "record")
        if _core.traces_started() - started > 1:
            raise TapeReplayError(
                "record: the function runs another transform inside (ta.grad, ta.jvp, "
                "ta.jacfwd, ta.checkpoint, ...). That transform's derivative rules and "
                "branch checks saw the recording's input values, and a replay cannot "
                "update them, so the recording would return wrong numbers at new inputs. "
                "Call the function directly, or record a function without the inner "
                "transform (for second derivatives use ta.hessian or ta.hvp)")
        if self.tape.values_read:
            raise TapeReplayError(
                "record: the function reads the number inside a traced value (x.primal, "
                "x.value) while it is recorded. Whatever Python computes from that number "
                "(a branch, a loop count, an index) is frozen in the recording, and a "
                "replay at new inputs could not update it. Compare traced values directly "
                "(if x > 0: ... is recorded as a guard), or call the function directly "
                "instead of recording it")
        if not (type(out) is Tracer and out.tape is self.tape):
            raise TypeError("record: the function's output does not depend on its "
                            "inputs; nothing to record")
        if np.shape(out.primal) != ():
            raise NonScalarOutputError("record: the function must return a scalar")
        self._out = out.idx
        self._trees = [tree_flatten(a)[1] for a in args]
        self._lock = threading.Lock()

    @property
    def n_nodes(self) -> int:
        """Number of nodes on the recorded tape (inputs included)."""
        return self.tape.n_nodes

    @property
    def nbytes(self) -> int:
        """Bytes of values the tape keeps for the reverse sweep (``tape.memory()["values"]``)."""
        return self.tape.nbytes

    def _load(self, args):
        if len(args) != len(self._trees):
            raise TypeError(f"the recording takes {len(self._trees)} arguments, "
                            f"got {len(args)}")
        flat = []
        for a, td in zip(args, self._trees):
            leaves, t2 = tree_flatten(a)
            if t2 != td:
                raise ShapeError("the arguments' structure differs from the recording's")
            flat.extend(_check_leaf(x, "record") for x in leaves)
        self.tape.replay(flat)
        self._in_leaves = [tree_flatten(a)[0] for a in args]

    def __call__(self, *args):
        """The value at new inputs (replay, no Python tracing).  Calls from
        several threads take turns (the tape holds one point at a time)."""
        with self._lock:
            self._load(args)
            return np.float64(self.tape.value(self._out))

    def value_and_grad(self, *args):
        """``(value, grads)`` at new inputs: replay, then one reverse sweep."""
        with self._lock:
            self._load(args)
            g = _grads(self.tape, [self._out], [1.0], self._in_leaves, self._in_trees,
                       self._in_ids, len(args) == 1)
            return np.float64(self.tape.value(self._out)), g


def record(f: Callable, *args) -> Recording:
    """Record ``f`` at ``args`` into a tape that can be re-evaluated.

    Comparisons on traced values are recorded as guards; a re-evaluation
    whose guard flips raises ``GuardFlippedError`` instead of returning the
    derivative of the wrong branch.

    Parameters
    ----------
    f : callable
        A scalar function of ``args``; it must not call another transform
        inside (``TapeReplayError``).
    *args
        The inputs to record at (floats, float arrays, pytrees).

    Returns
    -------
    Recording
        Callable at new inputs of the same structure and shapes;
        ``.value_and_grad(*args)`` gives the gradient there too.

    Examples
    --------
    >>> import tapead as ta
    >>> rec = ta.record(lambda x: x * x if x > 0 else -x, 2.0)
    >>> print(rec.value_and_grad(3.0))
    (np.float64(9.0), np.float64(6.0))
    >>> rec(-1.0)
    Traceback (most recent call last):
    ...
    tapead.errors.GuardFlippedError: ...
    """
    return Recording(f, args)
