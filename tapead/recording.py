"""``ta.record``: record a function once, replay its tape on new inputs.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from tapead import _core
from tapead._core import Tracer
from tapead._tree import tree_flatten
from tapead.boxing import check_leaf as _check_leaf, grads as _grads, record_call as _record
from tapead.errors import NonScalarOutputError, ShapeError, TapeReplayError

__all__ = ["record", "Recording"]


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
        with self._lock, _core.pooled():
            self._load(args)
            return np.float64(self.tape.value(self._out))

    def value_and_grad(self, *args):
        """``(value, grads)`` at new inputs: replay, then one reverse sweep."""
        with self._lock, _core.pooled():
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
