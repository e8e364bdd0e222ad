"""Lowering an expression DAG onto a tapead tape, and evaluating it there.

Every Function is evaluated by the compiled tape interpreter: the (simplified)
DAG is walked once in topological order, applying each op's ``fn`` (tapead
numpy operations) to ``Tape.input`` tracers, which records a tape.  Later
calls re-evaluate that tape with ``Tape.replay(new_inputs)``; no Python
tracing happens again.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from tapead._core import Tape, Tracer
from tapead.scaly.errors import LayoutError
from tapead.scaly.expr import OPS, Expr, topo_order


def _tape_value(value: np.ndarray) -> Any:
    """Scalars go on the tape unboxed (the C fast path)."""
    if value.ndim == 0 and value.dtype == np.float64:
        return float(value)
    return np.ascontiguousarray(value)


def _result(value: Any, dtype: np.dtype) -> Any:
    """A plain numpy result: np.float64 / np.bool_ scalars or an owned array."""
    if np.ndim(value) == 0:
        return dtype.type(value)
    return np.array(value, dtype=dtype)


def free_inputs(outputs: Sequence[Expr], inputs: Sequence[Expr]) -> List[Expr]:
    """Input nodes the outputs depend on that are not among ``inputs``."""
    known = {i.id for i in inputs}
    return [n for n in topo_order(outputs) if n.op == "input" and n.id not in known]


class LoweredProgram:
    """A DAG recorded on a tapead tape at some input values.

    Parameters
    ----------
    inputs : list of Expr
        Input nodes, one tape input each (in order).
    outputs : list of Expr
    values : list of numpy arrays
        Where the tape is first recorded.
    """

    def __init__(self, inputs: Sequence[Expr], outputs: Sequence[Expr],
                 values: Sequence[np.ndarray]):
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.tape = Tape()
        env: Dict[int, Any] = {}
        try:
            for node, value in zip(self.inputs, values):
                env[node.id] = self.tape.input(_tape_value(value))
            for node in topo_order(self.outputs):
                if node.id in env:
                    continue
                if node.op == "input":
                    raise LayoutError(f"the graph depends on input '{node.attrs['name']}', "
                                      "which is not an input of the Function")
                if node.op == "const":
                    env[node.id] = _tape_value(node.attrs["value"])
                    continue
                args = [env[o.id] for o in node.operands]
                env[node.id] = OPS[node.op].fn(*args, **node.attrs)
        finally:
            self.tape.active = False
        self._slots = []
        for node in self.outputs:
            v = env[node.id]
            if isinstance(v, Tracer) and v.tape is self.tape:
                self._slots.append((True, v.idx))
            else:
                self._slots.append((False, v.primal if isinstance(v, Tracer) else v))
        self._fresh = True

    @property
    def n_nodes(self) -> int:
        """Nodes of the recorded tape."""
        return self.tape.n_nodes

    def __call__(self, values: Sequence[np.ndarray]) -> List[Any]:
        """The outputs at ``values`` (replay; the first call reuses the recording)."""
        if not self._fresh:
            self.tape.replay([_tape_value(v) for v in values])
        self._fresh = False
        return [_result(self.tape.value(ref) if on_tape else ref, node.dtype)
                for (on_tape, ref), node in zip(self._slots, self.outputs)]
