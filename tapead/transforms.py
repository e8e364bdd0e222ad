"""The functional transforms: grad, jvp, vjp, jacobians, hvp.

Each transform starts a trace with a fresh level, boxes the inputs, runs the
user's Python function eagerly and reads the derivative off: reverse mode and
``jacfwd`` record a :class:`tapead.program.Program` (a tape) and sweep it,
``jvp`` runs on dual numbers (a ``ForwardTrace``).  Each returns a plain
function: ``ta.jit`` of it records what it does, sweeps included.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence, Union

import numpy as np

from tapead import _core
from tapead._core import Box, Dual, ForwardTrace, Tracer
from tapead._tree import tree_flatten, tree_unflatten
from tapead.boxing import (as_result, check_kinds, check_leaf, check_scalar_output,
                           concrete_tree, pack_outputs, plain, pooled, seed_like,
                           split_aux, unbox_out, zeros_like)
from tapead.program import Program, describe
from tapead.errors import ShapeError

__all__ = ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian",
           "hvp"]

ArgNums = Union[int, Sequence[int]]


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
        with _core.pooled():          # the intermediates reuse the last call's memory
            return _value_and_grad(f, args, kwargs, argnums, has_aux, holomorphic)
    return describe(value_and_grad_f, "value_and_grad", f, argnums, has_aux, holomorphic)


def _value_and_grad(f, args, kwargs, argnums, has_aux, holomorphic):
    """``value_and_grad(f)(*args, **kwargs)``: record, check the output, one sweep."""
    prog = Program.record(f, args, kwargs, argnums, "grad", holomorphic)
    tape, out = prog.tape, prog.out
    if holomorphic:
        check_kinds("grad", True, [x for leaves in prog.in_leaves for x in leaves])
    if has_aux:
        out, aux = split_aux(out, "grad")
    if holomorphic or not (type(out) is Tracer and type(out.primal) is float):
        check_scalar_output(out, "grad", has_aux, holomorphic)
        if holomorphic or _core.is_complex(out):
            check_kinds("grad", holomorphic, outs=[out])
    if type(out) is Tracer and out.tape is tape:
        outputs, seeds = [out.idx], [1.0 if not holomorphic else 1.0 + 0j]
    else:
        outputs, seeds = [], []
    g = prog.gradients(outputs, seeds)
    value = plain(unbox_out(out, tape))
    if has_aux:
        return (value, concrete_tree(aux, tape)), g
    return value, g


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
    return describe(grad_f, "grad", f, argnums, has_aux, holomorphic)


@pooled
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
    prog = Program.record(f, primals, {}, tuple(range(len(primals))), "vjp", True)
    tape, out = prog.tape, prog.out
    if has_aux:
        out, aux = split_aux(out, "vjp")
        aux = concrete_tree(aux, tape)
    out_leaves, out_tree = tree_flatten(out)
    values = [plain(unbox_out(x, tape)) for x in out_leaves]

    @pooled
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
            c = seed_like(c, v)
            if type(x) is Tracer and x.tape is tape:
                outputs.append(x.idx)
                seeds.append(float(c) if np.ndim(c) == 0 and isinstance(
                    c, (float, int, np.float64)) else c)
        return prog.gradients(outputs, seeds)

    out_val = tree_unflatten(out_tree, values)
    if has_aux:
        return out_val, pullback, aux
    return out_val, pullback


# ---------------------------------------------------------------------------
# forward mode (dual numbers)
# ---------------------------------------------------------------------------

@pooled
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
            p = check_leaf(p, "jvp", True)
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
            out, aux = split_aux(out, "jvp")
            aux = concrete_tree(aux, trace)
        out = pack_outputs(out)
    finally:
        trace.active = False
    o_leaves, o_tree = tree_flatten(out)
    vals, tans = [], []
    for x in o_leaves:
        if type(x) is Dual and x.ftrace is trace:
            vals.append(plain(x.primal))
            tans.append(plain(as_result(x.tangent, x.primal) if not isinstance(
                x.tangent, Box) else x.tangent))
        else:
            vals.append(plain(x))
            tans.append(zeros_like(x))
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
        with _core.pooled():      # the intermediates reuse the last call's memory
            prog = Program.record(f, args, kwargs, argnums, "jacfwd", holomorphic)
            tape, out, in_leaves, in_trees, in_ids, single = (
                prog.tape, prog.out, prog.in_leaves, prog.in_trees, prog.in_ids, prog.single)
            if has_aux:
                out, aux = split_aux(out, "jacfwd")
                aux = concrete_tree(aux, tape)
            flat_in = [x for leaves in in_leaves for x in leaves]
            if holomorphic:
                check_kinds("jacfwd", True, flat_in, tree_flatten(out)[0])
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
                val = unbox_out(x, tape)
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
    return describe(jac_f, "jacfwd", f, argnums, has_aux, holomorphic)


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
        with _core.pooled():      # the intermediates reuse the last call's memory
            prog = Program.record(f, args, kwargs, argnums, "jacrev", holomorphic)
            tape, out, in_leaves, in_trees, in_ids, single = (
                prog.tape, prog.out, prog.in_leaves, prog.in_trees, prog.in_ids, prog.single)
            if has_aux:
                out, aux = split_aux(out, "jacrev")
                aux = concrete_tree(aux, tape)
            out_leaves, out_tree = tree_flatten(out)
            flat_in = [x for leaves in in_leaves for x in leaves]
            if holomorphic or any(_core.is_complex(y) for y in out_leaves):
                check_kinds("jacrev", holomorphic, flat_in if holomorphic else None,
                             out_leaves)
            flat_ids = [i for ids in in_ids for i in ids]
            jac_leaves = []
            for x in out_leaves:
                val = unbox_out(x, tape)
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
                    rows.append([as_result(a, xin) for a, xin in zip(adjs, flat_in)])
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
    return describe(jac_f, "jacrev", f, argnums, has_aux, holomorphic)


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


@pooled
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

