"""The recorded program: a function run once on a new tape.

Every tape-based transform starts the same way -- box some inputs on a new
``Tape``, run the user's function, read results off the tape -- and
:class:`Program` is that one object.  ``grad``, ``value_and_grad``, ``vjp``,
``jacrev`` sweep it backwards (:meth:`Program.gradients`), ``jacfwd`` pushes
tangents through it, ``ta.jit`` and ``ta.record`` keep it and evaluate it
again at new inputs (:meth:`Program.evaluate`).  Forward mode on dual numbers
(``jvp``, and ``hvp`` = ``jvp`` of ``grad``) runs no tape of its own.

A program that will be evaluated again (``replayable=True``) may itself run
other transforms inside: their sweeps are recorded on it like any other
operations (the tape of the reverse sweep), branches at every level are
guards, and constants that rules compute from values (a sign, a mask) are
recorded nodes (``_core.is_recorded``), so evaluating it at new inputs is the
derivative computation at those inputs.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, List, NamedTuple, Sequence

import numpy as np

from tapead._core import Tape, Tracer
from tapead._tree import tree_flatten, tree_unflatten
from tapead.boxing import (Where, as_result, check_leaf, normalize_argnums, pack_outputs)

__all__ = ["Program", "Derivative", "describe", "derivative_of"]


class Derivative(NamedTuple):
    """What a function made by ``grad``, ``value_and_grad``, ``jacfwd`` or
    ``jacrev`` computes, as its ``derivative`` attribute: ``vmap`` reads it
    to run the derivative of the mapped function once for all lanes instead
    of one derivative per lane."""
    kind: str                # "grad", "value_and_grad", "jacfwd" or "jacrev"
    fun: Callable            # the function differentiated
    argnums: Any
    has_aux: bool
    holomorphic: bool
    wrapper: Any             # a weak reference to the function the transform returned


def describe(f, kind, fun, argnums, has_aux, holomorphic):
    """Set ``f.derivative`` (see :class:`Derivative`); returns ``f``."""
    f.derivative = Derivative(kind, fun, argnums, has_aux, holomorphic, weakref.ref(f))
    return f


def derivative_of(f) -> "Derivative | None":
    """``f.derivative`` when ``f`` is itself the function a derivative transform
    returned (not a function wrapping it: ``functools.wraps`` copies the
    attribute), else None."""
    d = getattr(f, "derivative", None)
    return d if isinstance(d, Derivative) and d.wrapper() is f else None


class Program:
    """A function recorded on a tape, with where its inputs and outputs are.

    Attributes
    ----------
    tape : Tape
        The recording.
    out : object
        What the function returned (traced values are ``Tracer`` boxes on
        ``tape``; numpy object arrays of tracers packed into traced arrays).
    in_leaves : list of list
        Per differentiated (traced) argument, its leaves as given.
    in_trees : list of TreeDef
        Their tree structures.
    in_ids : list of sequence of int
        Their input node ids on the tape.
    single : bool
        A single argument was differentiated (``argnums`` an int): results
        come back bare, not in a tuple.
    """

    __slots__ = ("tape", "out", "in_leaves", "in_trees", "in_ids", "single")

    def __init__(self, tape, out, in_leaves, in_trees, in_ids, single):
        self.tape, self.out = tape, out
        self.in_leaves, self.in_trees, self.in_ids, self.single = (
            in_leaves, in_trees, in_ids, single)

    # -- recording ---------------------------------------------------------
    @classmethod
    def record(cls, f: Callable, args: Sequence, kwargs: dict, argnums, name: str,
               complex_ok: bool = False) -> "Program":
        """Run ``f(*args, **kwargs)`` with the ``argnums`` arguments boxed on a
        new tape (each leaf checked differentiable: floats, float arrays,
        complex ones when ``complex_ok``)."""
        nums, single = normalize_argnums(argnums, len(args))
        tape = Tape()
        boxed = list(args)
        in_leaves, in_trees, in_ids = [], [], []
        try:
            for a in nums:
                leaves, td = tree_flatten(args[a])
                scalars = td.all_float or td.all_f64    # float leaves: scalar input nodes
                if not scalars:
                    what = Where(name, a)
                    leaves = [x if type(x) is np.ndarray and x.ndim and x.dtype.kind == "f"
                              else check_leaf(x, what, complex_ok) for x in leaves]
                start = tape.n_nodes
                tracers = tape.input_many(leaves)
                in_leaves.append(leaves)
                in_trees.append(td)
                in_ids.append(range(start, start + len(leaves)) if scalars else
                              tape.inputs[len(tape.inputs) - len(leaves):])
                boxed[a] = tree_unflatten(td, tracers)
            out = pack_outputs(f(*boxed, **kwargs))
        finally:
            tape.active = False
        return cls(tape, out, in_leaves, in_trees, in_ids, single)

    @classmethod
    def record_replayable(cls, call: Callable, leaves: list, traced: Sequence[int]) -> "Program":
        """Run ``call(boxed_leaves)`` on a new tape that will be evaluated again
        at new inputs, ``leaves[j]`` boxed for each ``j`` in ``traced`` (one
        input node each, in that order); the others are passed as they are."""
        tape = Tape()
        tape.replayable = True
        boxed = list(leaves)
        try:
            tracers = tape.input_many([leaves[j] for j in traced])
            for j, t in zip(traced, tracers):
                boxed[j] = t
            out = pack_outputs(call(boxed))
        finally:
            tape.active = False
        return cls(tape, out, [], [], [list(tape.inputs)], False)

    # -- reading it --------------------------------------------------------
    def gradients(self, outputs: Sequence[int], seeds: Sequence) -> object:
        """One reverse sweep from ``outputs`` (node ids) seeded by ``seeds``:
        the cotangent of every differentiated input, in its argument's
        structure, shapes and dtypes (a tuple of arguments unless ``single``)."""
        tape, in_leaves, in_trees, in_ids = self.tape, self.in_leaves, self.in_trees, \
            self.in_ids
        flat_ids = in_ids[0] if len(in_ids) == 1 else [i for ids in in_ids for i in ids]
        adjs = (tape.backward(outputs, seeds, flat_ids, dense=True) if outputs
                else [None] * len(flat_ids))
        result, k = [], 0
        for leaves, td in zip(in_leaves, in_trees):
            n = len(leaves)
            if getattr(td, "all_float", False) and isinstance(adjs, np.ndarray):
                gs = adjs[k:k + n].tolist()    # Python floats, one per float leaf
            elif getattr(td, "all_f64", False) and isinstance(adjs, np.ndarray):
                gs = list(adjs[k:k + n])       # np.float64 scalars, one per leaf
            else:
                if isinstance(adjs, np.ndarray):
                    adjs = list(adjs)
                gs = [a if type(a) is np.ndarray and type(x) is np.ndarray
                      and a.dtype == x.dtype and a.shape == x.shape else as_result(a, x)
                      for a, x in zip(adjs[k:k + n], leaves)]
            k += len(leaves)
            result.append(tree_unflatten(td, gs))
        return result[0] if self.single else tuple(result)

    def node_of(self, x) -> int:
        """The node id of ``x`` on this program's tape, or -1 (a constant, or a
        value of another transform)."""
        return x.idx if type(x) is Tracer and x.tape is self.tape else -1

    def evaluate(self, values: list, outputs: List[int]):
        """The values of nodes ``outputs`` at new input ``values`` (one per
        input node): the recorded program run again without Python tracing.
        Raises ``GuardFlippedError`` where a recorded branch goes the other way
        and ``TapeReplayError`` where a shape changed."""
        vals = self.tape.evaluate(values, outputs)
        if vals is None:              # a value not exactly of its recorded kind
            self.tape.replay(values, partials=False)
            vals = [self.tape.value(i) if i >= 0 else None for i in outputs]
        return vals
