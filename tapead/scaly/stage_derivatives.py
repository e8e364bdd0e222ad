"""Stage derivative Functions of mapped calls, built once per callee.

A mapped call (``expr.vmap``, ``tapead.scaly.mapped``) is differentiated
into a mapped call of a derivative of its stage Function.  The derivative
Functions built here are ordinary Functions (printed as their own
``expr.func``, differentiable again) and are cached per stage Function and
request, so differentiating the same stage again, or many mapped calls of
it, reuses them (``BUILDS`` counts the builds):

* ``<stage>_adj<out>_<in>``: the adjoint of input leaf ``<in>`` (a number)
  given a weight ``adj_<output>`` on output ``<out>``; it takes only the
  stage inputs its graph uses, then the weight;
* ``<stage>_fwd<K>c<hex>_<output>_<inputs>``: the tangent of an output along
  ``K`` directions (``K`` omitted for one direction); seeds that are the same
  in every stage are constants of its body, named by the hexadecimal digest
  after ``c``; other seeds are inputs ``seed_<input>`` of shape
  ``(size, K)`` after the stage inputs it uses.
"""
from __future__ import annotations

import collections
import hashlib
import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly.sweeps import forward_tangents, forward_tangents_many, reverse_adjoints
from tapead.scaly.expr import OPS, Expr, apply, const, is_const, reshape, sym
from tapead.scaly.graphs import topo_order
from tapead.scaly.function import Function, leaf_like
from tapead.scaly.sparsity import Sparsity, _pattern
from tapead.scaly.types import TensorType

#: kind of stage Function ("adjoint", "forward", "pattern") -> number built
BUILDS: "collections.Counter[str]" = collections.Counter()

_CACHE: "weakref.WeakKeyDictionary[Function, Dict[tuple, object]]" = \
    weakref.WeakKeyDictionary()


def cached(fn: Function, key: tuple, build):
    table = _CACHE.setdefault(fn, {})
    if key not in table:
        table[key] = build()
    return table[key]


def _fresh_name(name: str, taken: Sequence[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _function(fn: Function, name: str, used: Sequence[int], extra: Sequence[Tuple[str, Expr]],
              out_name: str, value: Expr) -> Function:
    """A Function of ``fn``'s inputs ``used`` and the ``extra`` (name, input
    node) pairs, returning ``value``, in ``fn``'s declaration style."""
    leaves = [fn.input_leaves[j] for j in used] + [leaf_like(fn.style, nm, e.type)
                                                   for nm, e in extra]
    inputs = [fn.inputs[j] for j in used] + [e for _, e in extra]
    if fn.style == "L":
        params = [lay.G(*leaves)] if len(leaves) > 1 else leaves
    else:
        params = leaves
    out = leaf_like(fn.style, out_name, TensorType(value.shape))
    return Function(name, params, out, inputs, [value], fn.style)


def _used_inputs(fn: Function, value: Expr) -> List[int]:
    ids = {node.id for node in topo_order([value]) if node.op == "input"}
    return [j for j, x in enumerate(fn.inputs) if x.id in ids]


def stage_adjoint(fn: Function, out: int, inp: int) -> Optional[Tuple[Function, List[int]]]:
    """``(<stage>_adj<out>_<inp>, stage inputs it takes)``, or None when the
    output does not depend on that input."""
    def build():
        y = fn.mapped_outputs()[out]
        w_name = _fresh_name(f"adj_{fn.output_leaves[out].name}", fn.input_names)
        w = sym(w_name, y.type)
        a = reverse_adjoints(y, w, [fn.inputs[inp]])[0]
        if is_const(a, 0.0):
            return None
        used = _used_inputs(fn, a)
        BUILDS["adjoint"] += 1
        f = _function(fn, f"{fn.name}_adj{out}_{inp}", used, [(w_name, w)],
                      f"adj_{fn.input_leaves[inp].name}", a)
        return f, used
    return cached(fn, ("adjoint", out, inp), build)


def stage_derivative(fn: Function, out: int, k: Optional[int], folded: Dict[int, np.ndarray],
                     passed: Tuple[int, ...]) -> Optional[Tuple[Function, List[int]]]:
    """``(<stage>_fwd..., stage inputs it takes)``: the tangent of output
    ``out`` along ``k`` directions (one when ``k`` is None).

    ``folded`` maps input leaves to their seed in every stage (an array of
    shape ``(k, size)``, or ``(size,)``): constants of the body.  ``passed``
    lists the leaves whose seeds are inputs, shape ``(size, k)`` (the leaf's
    shape for one direction).  None when the tangent is zero.
    """
    digest = hashlib.sha1(repr((k, passed, [(j, folded[j].shape) for j in sorted(folded)]))
                          .encode())
    for j in sorted(folded):
        digest.update(np.ascontiguousarray(folded[j], dtype=np.float64).tobytes())
    key = ("forward", out, k, passed, digest.hexdigest())

    def build():
        y = fn.mapped_outputs()[out]
        seeds: Dict[int, Expr] = {}
        for j in sorted(folded):
            shape = ((k,) if k else ()) + fn.input_leaves[j].type.shape
            seeds[fn.inputs[j].id] = const(np.reshape(folded[j], shape))
        extra = []
        for j in passed:
            leaf = fn.input_leaves[j]
            name = _fresh_name(f"seed_{leaf.name}", fn.input_names)
            if k:
                s = sym(name, TensorType((leaf.type.size, k)))
                seeds[fn.inputs[j].id] = reshape(apply("transpose", s, axes=(1, 0)),
                                                 (k,) + leaf.type.shape)
            else:
                s = sym(name, leaf.type)
                seeds[fn.inputs[j].id] = s
            extra.append((name, s))
        if k:
            t = forward_tangents_many([y], seeds, k)[0]
        else:
            t = forward_tangents([y], seeds)[0]
        if t is None:
            return None
        used = _used_inputs(fn, t)
        names = "_".join(fn.input_leaves[j].name for j in sorted(set(folded) | set(passed)))
        tag = f"fwd{k or ''}" + (f"c{digest.hexdigest()[:10]}" if folded else "")
        BUILDS["forward"] += 1
        f = _function(fn, f"{fn.name}_{tag}_{fn.output_leaves[out].name}_{names}", used,
                      extra, f"fwd_{fn.output_leaves[out].name}", t)
        return f, used
    return cached(fn, key, build)


def stage_pattern(fn: Function, out: int, inp: int):
    """The stage's Jacobian pattern of output ``out`` over input leaf ``inp``,
    a ``scipy.sparse`` CSR array (out size, leaf size)."""
    def build():
        BUILDS["pattern"] += 1
        return _pattern(fn.mapped_outputs()[out], fn.inputs[inp]).to_scipy()
    return cached(fn, ("pattern", out, inp), build)


def stage_sparsity(fn: Function, out: int, inp: int) -> Sparsity:
    """:func:`stage_pattern` as a ``Sparsity``."""
    return Sparsity(stage_pattern(fn, out, inp))


def depends_on(e: Expr, x: Expr) -> bool:
    """Whether the expression ``e`` reads the input node ``x``."""
    return e.diff and any(node is x for node in topo_order([e]))


def constant_value(t: Expr) -> Optional[np.ndarray]:
    """The value of an expression that depends on no input, or None."""
    if t.op == "const":
        return np.asarray(t.attrs["value"])
    if t.diff:
        return None
    order = topo_order([t])
    if any(node.op == "input" for node in order):
        return None
    values: Dict[int, np.ndarray] = {}
    for node in order:
        if node.op == "const":
            values[node.id] = np.asarray(node.attrs["value"])
        else:
            args = [values[o.id] for o in node.operands]
            values[node.id] = np.asarray(OPS[node.op].fn(*args, **node.attrs))
    return values[t.id]


__all__ = ["BUILDS", "stage_adjoint", "stage_derivative", "stage_pattern", "stage_sparsity",
           "constant_value", "depends_on"]
