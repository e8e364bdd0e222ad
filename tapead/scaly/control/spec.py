"""What a loop, branch or custom-call node computes: ``LoopSpec``, and the
helpers that build the Functions of derived loops.

A loop is one node per output in the caller's graph, all sharing a
``LoopSpec`` that holds the body Function(s) and the static options; the
body is never copied into the caller, so the graph does not grow with the
number of steps.  Output numbering:

* ``scan``: final carries, then stacked outputs, then trajectories (the
  carries entering each step, stacked; only reverse mode reads them);
* ``while_loop``: final carries, the int64 count, then trajectories; with
  ``checkpoints=``, one more output: the carries stored by the online
  schedule (``snapshot_output``; an opaque value that only the checkpointed
  backward loop reads, see ``tapead.scaly.control.checkpoints``);
* ``cond`` and ``custom_call``: the outputs of the branch (Function).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from tapead.scaly import layout as lay
from tapead.scaly.function import Function
from tapead.scaly.expr import Expr, make_node, sym, zeros
from tapead.scaly.types import TensorType, dtypes
from tapead.scaly.sparsity import _pattern

FLOAT = dtypes.float64


class LoopSpec:
    """The static description of one loop, branch or custom call.

    Attributes
    ----------
    op : str
        ``"scan"``, ``"while_loop"``, ``"cond"`` or ``"custom_call"``.
    body : Function or None
        The step Function (the Function itself for ``custom_call``).
    cond : Function or None
        The condition of a while loop.
    branches : tuple of Function
        The branches of a ``cond``.
    carry_types : list of TensorType
        One per carry leaf (``n_carry`` of them).
    xs_types, windows : list
        Per further body input leaf (after the carries and the step number):
        its type and ``(start, stride)`` in the flat operand (``(0, 0)``:
        passed whole; ``(0, size)``: the k-th slice).
    y_types : list of TensorType
        Per stacked output leaf, the per-step type.
    length : int
        ``length`` of a scan, ``max_iter`` of a while loop.
    """

    def __init__(self, op: str, name: str, *, body=None, cond=None, branches=(),
                 carry_types=(), xs_types=(), windows=(), y_types=(), out_types=None,
                 length=0, index=False, reverse=False, has_trip=False,
                 max_trajectory=None, in_place=(), strict_carries=(), forward=None,
                 reverse_fn=None, checkpoints=None):
        self.op, self.name = op, name
        self.body, self.cond, self.branches = body, cond, tuple(branches)
        self.carry_types = list(carry_types)
        self.n_carry = len(self.carry_types)
        self.xs_types, self.windows = list(xs_types), list(windows)
        self.y_types = list(y_types)
        self.length, self.index, self.reverse = int(length), bool(index), bool(reverse)
        self.has_trip = bool(has_trip)
        self.max_trajectory = max_trajectory
        self.in_place = tuple(in_place)
        self.strict_carries = tuple(strict_carries)
        #: revolve snapshots for reverse mode instead of the stored trajectory
        self.checkpoints = checkpoints
        #: on a checkpointed backward loop: the primal scan whose steps it
        #: recomputes, and the backward loop it stands for (that reads the
        #: stored trajectory; its derivatives are this loop's)
        self.recompute: Optional["LoopSpec"] = None
        self.equivalent: Optional["LoopSpec"] = None
        #: on a checkpointed backward loop: how many of its last per-step
        #: inputs (the trajectory's adjoints) are zero, passed as one zero each
        self.zero_traj_adjoints = 0
        self.custom_forward, self.custom_reverse = forward, reverse_fn
        #: the output holding a checkpointed while loop's stored carries
        self.snapshot_output: Optional[int] = None
        L = self.length
        if op == "scan":
            self.out_types = (self.carry_types
                              + [TensorType((L,) + t.shape, t.dtype) for t in self.y_types]
                              + [TensorType((L,) + t.shape, t.dtype)
                                 for t in self.carry_types])
            self.traj_offset = self.n_carry + len(self.y_types)
        elif op == "while_loop":
            self.out_types = (self.carry_types + [TensorType((), dtypes.int64)]
                              + [TensorType((L,) + t.shape, t.dtype)
                                 for t in self.carry_types])
            self.traj_offset = self.n_carry + 1
            if checkpoints is not None:
                self.snapshot_output = len(self.out_types)
                self.out_types.append(TensorType((), FLOAT))
        else:
            self.out_types = list(out_types)
            self.traj_offset = len(self.out_types)
        self._derived: Dict[str, Any] = {}
        self._patterns: Dict[int, list] = {}

    @property
    def functions(self) -> List[Any]:
        """The Functions this node calls (listed after the caller)."""
        return [f for f in (self.body, self.cond) + self.branches if f is not None]

    def display(self) -> Dict[str, Any]:
        """The attributes a listing shows (besides ``output``)."""
        if self.op == "scan":
            d = {"callee": self.name, "length": self.length}
            if self.index:
                d["index"] = True
            if self.reverse:
                d["reverse"] = True
            if self.has_trip:
                d["trip"] = True
            if self.checkpoints is not None:
                d["checkpoints"] = self.checkpoints
            return d
        if self.op == "while_loop":
            d = {"callee": self.name, "cond": self.cond.name, "max_iter": self.length}
            if self.index:
                d["index"] = True
            if self.checkpoints is not None:
                d["checkpoints"] = self.checkpoints
            return d
        if self.op == "cond":
            return {"branches": ", ".join(f.name for f in self.branches)}
        return {"callee": self.name}

    def nodes(self, operands: Sequence[Expr]) -> List[Expr]:
        """One node per output of this spec on ``operands``."""
        shown = self.display()
        return [make_node(self.op, operands, dict(shown, spec=self, output=k))
                for k in range(len(self.out_types))]

    def branch_patterns(self, k: int) -> list:
        """Per operand, the union over branches of the pattern of output ``k``
        with respect to it (None for a non-float operand)."""
        if k not in self._patterns:
            pats = []
            for j, t in enumerate(self.xs_types):
                if t.dtype != FLOAT:
                    pats.append(None)
                    continue
                P = None
                for fn in self.branches:
                    Pb = _pattern(fn.expanded_outputs()[k], fn.inputs[j]).to_scipy()
                    P = Pb if P is None else (P + Pb)
                pats.append(P)
            self._patterns[k] = pats
        return self._patterns[k]


# ---------------------------------------------------------------------------
# building Functions from expressions
# ---------------------------------------------------------------------------

def check_function(fn, what: str, captured_ok: bool = False):
    """``fn``, which must be an ``sc.Function`` (``what`` names it in the error);
    one that captured symbols of an enclosing Function only with
    ``captured_ok`` (the caller passes them in, ``closure_converted``)."""
    if not isinstance(fn, Function):
        raise TypeError(f"{what} must be an sc.Function (made with @sc.function), got {fn!r}")
    return fn if captured_ok else fn.closed(what)


def closure_converted(fns: Sequence[Function]) -> Tuple[List[Function], List[Expr]]:
    """``(fns', extra)``: Functions that captured symbols of the Function being
    defined take all of them (``extra``, in first-use order) as further
    trailing parameters, so that a loop or branch passes them in."""
    extra, seen = [], set()
    for fn in fns:
        for node in fn.captured:
            if node.id not in seen:
                seen.add(node.id)
                extra.append(node)
    if not extra:
        return list(fns), []
    return [fn.with_inputs(extra) for fn in fns], extra


def fresh(base: str, taken: set) -> str:
    """``base`` (or ``base_2``, ``base_3`` ...) not in ``taken``; marks it taken."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def make_function(name: str, inputs: Sequence[Expr], outputs: Sequence[Tuple[str, Expr]]):
    """A Function with input nodes ``inputs`` (named by their symbols) and the
    named output expressions, all leaves of one group."""
    params = [lay.arg(node.attrs["name"], node.type) for node in inputs]
    outs = lay.group(*[lay.arg(n, e.type) for n, e in outputs])
    return Function(name, params, outs, list(inputs), [e for _, e in outputs])


def new_inputs(prefix: str, like: Sequence[Expr], taken: set,
                names: Optional[Sequence[str]] = None) -> List[Expr]:
    """New input nodes typed like ``like``, named ``prefix`` + their names
    (``names``, or the input names of ``like``)."""
    names = [node.attrs["name"] for node in like] if names is None else names
    return [sym(fresh(f"{prefix}{n}", taken), node.type) for n, node in zip(names, like)]


def zero_if_none(t: Optional[Expr], ttype: TensorType) -> Expr:
    return zeros(ttype.shape) if t is None else t


def names_of(fn) -> set:
    return set(fn.input_names) | set(fn.output_names)


def step_parts(spec):
    """The step Function's inputs split as (carries, index or None, xs) and
    its outputs as (carries, ys)."""
    fn, nc = spec.body, spec.n_carry
    ins = fn.inputs
    idx = ins[nc] if spec.index else None
    xs = ins[nc + (1 if spec.index else 0):]
    outs = fn.expanded_outputs()
    return ins[:nc], idx, xs, outs[:nc], outs[nc:]


def floats(nodes) -> List[int]:
    return [j for j, n in enumerate(nodes) if n.dtype == FLOAT]
