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
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{what}: unexpected container")
    raise TypeError(f"{what}: cannot differentiate with respect to a "
                    f"{type(x).__name__}; pass floats or float numpy arrays")


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
    dtype = np.result_type(_core.concrete(like))
    if dtype.kind != "c" and _core.is_complex(g):
        raise NonDifferentiableError(
            "a derivative of a real value came out complex (casting it to real would "
            "drop its imaginary part); some operation lacks a correct complex rule. "
            "Take np.real explicitly where the computation goes back to real values")
    if isinstance(g, Box):          # traced by an outer transform: cast on its trace
        if np.result_type(_core.concrete(g)) != dtype and np.issubdtype(dtype, np.inexact):
            from tapead._prims.elementwise import astype
            return astype(g, dtype)
        return g
    if np.ndim(g) == 0 and np.ndim(_core.concrete(like)) == 0:
        return dtype.type(g)
    out = np.asarray(g, dtype=dtype)
    shape = np.shape(_core.concrete(like))
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


def _check_kinds(name, holomorphic, leaves=None, outs=None, real_outs=True):
    """JAX's rules for complex values: without ``holomorphic``, inputs (and, for
    reverse mode, outputs) must be real; with it, both must be complex."""
    for x in leaves or ():
        if holomorphic and not _core.is_complex(x):
            raise TypeError(f"{name} with holomorphic=True needs complex inputs, got "
                            f"{np.result_type(_core.concrete(x))}; pass complex values "
                            "(e.g. x + 0j) or drop holomorphic=True")
    for y in outs or ():
        cx = _core.is_complex(y)
        if holomorphic and not cx:
            raise TypeError(f"{name} with holomorphic=True needs a complex-valued "
                            f"function, got an output of dtype "
                            f"{np.result_type(_core.concrete(y))}; drop holomorphic=True "
                            "for real-valued functions")
        if cx and real_outs and not holomorphic:
            raise TypeError(f"{name} requires real-valued outputs, got "
                            f"{np.result_type(_core.concrete(y))}. Pass holomorphic=True "
                            "for a holomorphic function, take np.real / np.abs of the "
                            "output, or use ta.vjp for other complex outputs")


def _seed_like(c, v):
    """A cotangent seed in the output's kind: real seeds of complex outputs
    become complex; complex seeds of real outputs are refused."""
    if _core.is_complex(c) and not _core.is_complex(v):
        raise TypeError(f"pullback: complex cotangent for a real output (dtype "
                        f"{np.result_type(_core.concrete(v))}); pass a real cotangent")
    if _core.is_complex(v) and not _core.is_complex(c) and not isinstance(c, Box):
        return np.asarray(c, dtype=np.result_type(_core.concrete(v)))[()] \
            if np.ndim(c) == 0 else np.asarray(c, dtype=np.result_type(_core.concrete(v)))
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
        out = f(*boxed, **kwargs)
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
        Returns a scalar (or ``(scalar, aux)`` with ``has_aux``).
    argnums : int or tuple of int
        Positional arguments to differentiate (pytrees allowed).
    has_aux : bool
        ``f`` returns ``(value, aux)``; aux is passed through.
    holomorphic : bool
        ``f`` is a holomorphic function of complex inputs with a complex
        output: the gradient is the complex derivative ``f'(z)`` (as JAX).
        Without it, inputs and output must be real.

    Returns
    -------
    callable
        ``(value, grad)`` or ``((value, aux), grad)``; the gradient has the
        structure, shapes and dtypes of the differentiated arguments.
    """
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "grad", holomorphic)
        if holomorphic:
            _check_kinds("grad", True, [x for leaves in in_leaves for x in leaves])
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("grad(has_aux=True): the function must return a pair "
                                "(scalar value, auxiliary data)")
            out, aux = out
        if holomorphic or _core.is_complex(out):
            _check_kinds("grad", holomorphic, outs=[out])
        if type(out) is Tracer and out.tape is tape:
            if shape_of(out) != ():
                raise NonScalarOutputError(
                    f"grad needs a function with a scalar output, got shape "
                    f"{np.shape(out.primal)}; use ta.jacrev / ta.vjp for vector outputs "
                    "or reduce the output (e.g. .sum())")
            outputs, seeds = [out.idx], [1.0 if not holomorphic else 1.0 + 0j]
        else:
            if np.shape(out) != ():
                raise NonScalarOutputError(
                    f"grad needs a function with a scalar output, got shape "
                    f"{np.shape(out)}")
            outputs, seeds = [], []
        g = _grads(tape, outputs, seeds, in_leaves, in_trees, in_ids, single)
        value = _plain(_unbox_out(out, tape))
        if has_aux:
            return (value, aux), g
        return value, g
    return value_and_grad_f


def grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """Gradient of a scalar function (reverse mode, one sweep).

    ``holomorphic=True`` differentiates a holomorphic function of complex
    inputs: the result is ``f'(z)`` (see ``value_and_grad``).

    >>> import tapead as ta
    >>> float(ta.grad(lambda x: x * x + 3.0 * x)(2.0))
    7.0
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
    return grad_f


def vjp(f: Callable, *primals, has_aux: bool = False):
    """``(f(*primals), pullback)``; ``pullback(ct)`` returns a tuple per primal."""
    tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
        f, primals, {}, tuple(range(len(primals))), "vjp", True)
    if has_aux:
        out, aux = out
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

def jvp(f: Callable, primals: Sequence, tangents: Sequence):
    """``(f(*primals), J·tangents)`` by dual numbers, in one forward run."""
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
                    f"{np.result_type(_core.concrete(t))}; make the tangent's dtype match")
            if np.shape(p) != np.shape(t):
                raise ShapeError(f"jvp: tangent of shape {np.shape(t)} for a primal of "
                                 f"shape {np.shape(p)}; they must match")
            if isinstance(t, int) and not isinstance(t, bool):
                t = float(t)
            duals.append(trace.input(p, t))
        out = f(*tree_unflatten(p_tree, duals))
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


def jacfwd(f: Callable, argnums: ArgNums = 0, holomorphic: bool = False) -> Callable:
    """Jacobian by forward mode: one recording, all input directions at once.

    The tape is recorded once and a batched forward sweep carries one
    tangent direction per input element (an extra leading axis).  The
    result is shaped ``out.shape + in.shape``.  Inputs must be real (the
    outputs may be complex) unless ``holomorphic=True``: then inputs and
    outputs are complex and the result is the complex derivative.
    """
    @functools.wraps(f)
    def jac_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "jacfwd", holomorphic)
        flat_in = [x for leaves in in_leaves for x in leaves]
        if holomorphic:
            _check_kinds("jacfwd", True, flat_in, tree_flatten(out)[0])
        flat_ids = [i for ids in in_ids for i in ids]
        sizes = [int(np.prod(np.shape(x))) for x in flat_in]
        K = int(sum(sizes))
        seeds, off = {}, 0
        for x, nid, m in zip(flat_in, flat_ids, sizes):
            eye = np.zeros((K, m), dtype=np.result_type(_core.concrete(x)))
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
                t = np.zeros((K,) + oshape, dtype=np.result_type(_core.concrete(val)))
            if isinstance(t, Box):      # tangents traced by an outer transform
                from tapead._prims.shape import moveaxis, reshape
            else:
                moveaxis, reshape = np.moveaxis, np.reshape
                t = np.asarray(t, dtype=np.result_type(_core.concrete(val)))
            t = reshape(t, (K,) + oshape)
            blocks, off = [], 0
            for xin, m in zip(flat_in, sizes):
                blk = reshape(moveaxis(t[off:off + m], 0, -1), oshape + np.shape(xin))
                blocks.append(blk)
                off += m
            jac_leaves.append(_per_argument(blocks, in_leaves, in_trees, single))
        return tree_unflatten(out_tree, jac_leaves)
    return jac_f


def jacrev(f: Callable, argnums: ArgNums = 0, holomorphic: bool = False) -> Callable:
    """Jacobian by reverse mode: one recording, one sweep per output element.

    Inputs and outputs must be real unless ``holomorphic=True``: then both are
    complex and the result is the complex derivative (as JAX).
    """
    @functools.wraps(f)
    def jac_f(*args, **kwargs):
        tape, out, nums, single, in_leaves, in_trees, in_ids = _record(
            f, args, kwargs, argnums, "jacrev", holomorphic)
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
                        seed = np.zeros(oshape, dtype=np.result_type(_core.concrete(val)))
                        seed.flat[j] = 1.0
                    adjs = tape.backward([x.idx], [seed], flat_ids)
                else:
                    adjs = [None] * len(flat_ids)
                rows.append([_as_result(a, xin) for a, xin in zip(adjs, flat_in)])
            blocks = []
            for k, xin in enumerate(flat_in):
                ishape = np.shape(_core.concrete(xin))
                if rows and isinstance(rows[0][k], Box):
                    from tapead._prims.shape import reshape, stack
                    blk = reshape(stack([r[k] for r in rows]), oshape + ishape)
                else:
                    dt = np.result_type(_core.concrete(xin))
                    blk = (np.stack([np.asarray(r[k]) for r in rows]).reshape(oshape + ishape)
                           if rows else np.zeros(oshape + ishape, dtype=dt))
                blocks.append(blk)
            jac_leaves.append(_per_argument(blocks, in_leaves, in_trees, single))
        return tree_unflatten(out_tree, jac_leaves)
    return jac_f


def hessian(f: Callable, argnums: ArgNums = 0, holomorphic: bool = False) -> Callable:
    """Hessian, forward over reverse: ``jacfwd(grad(f))``; ``holomorphic=True``
    for holomorphic functions of complex inputs (as ``grad``)."""
    return jacfwd(grad(f, argnums, holomorphic=holomorphic), argnums, holomorphic=holomorphic)


def hvp(f: Callable, primals: Sequence, tangents: Sequence):
    """Hessian-vector product ``H·v`` by forward over reverse.

    One forward run on dual numbers through one reverse sweep: the tape's
    values are duals, so the gradient's tangent part is ``H·v``.  No
    Hessian is formed.  Returns the tangent (same structure as primals[0]
    when there is one primal, else a tuple).
    """
    primals, tangents = tuple(primals), tuple(tangents)
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(f, argnums), primals, tangents)[1]


# ---------------------------------------------------------------------------
# recorded tapes
# ---------------------------------------------------------------------------

class Recording:
    """A tape recorded from ``f`` at some inputs, re-evaluable at new ones.

    Attributes
    ----------
    tape : Tape
        The recorded tape (``tape.n_nodes``, ``tape.nbytes``).
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
        return self.tape.n_nodes

    @property
    def nbytes(self) -> int:
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
    whose guard flips raises ``GuardFlippedError``.
    """
    return Recording(f, args)
