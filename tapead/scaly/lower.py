"""Lowering an expression DAG onto a tapead tape, and evaluating it there.

Every Function is evaluated by the compiled tape interpreter: the (simplified)
DAG is walked once in topological order, applying each op's ``fn`` (tapead
numpy operations) to ``Tape.input`` tracers, which records a tape.  Later
calls re-evaluate that tape with ``Tape.evaluate`` (a replay of the values
only, scalar runs in C without the GIL); no Python tracing happens again.
``LoweredProgram.run_exact`` is the fast entry of ``Function.__call__`` for
arguments that are already numbers of the right kind.

Scalar code over small vectors (``x[0] * x[2]``, gradients that scatter
scalars into a vector and add the pieces) is lowered *element by element*:
such a float64 input is fed to the tape as one scalar input per element, and
``gather``, ``scatter``, ``add``, ``sub``, ``neg``, ``reshape`` and ``stack``
of scalars keep their value as a map of flat positions to scalar tape values
(``_Elements``).  Those ops then record scalar C nodes, or none at all,
instead of one array node each; an array is packed (one ``scaly_pack`` node)
only where an op needs the whole array or a Function output is one.
"""
from __future__ import annotations

import threading
from itertools import repeat
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

import tapead.numpy as tnp
from tapead import _core
from tapead._core import Tape, Tracer
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, Primitive
from tapead.errors import LayoutError
from tapead.scaly.expr import OPS, Expr
from tapead.scaly.graphs import topo_order

#: A float64 input of at most this many elements that is indexed elementwise
#: is fed to the tape element by element ...
SPREAD_ALWAYS = 64
#: ... and a larger one when its gathers read at least this share of it.
SPREAD_SHARE = 0.25


#: op name -> ``lower(program, node, args) -> tape value`` for ops whose
#: lowering needs more than their ``fn`` (loops and branches share one
#: evaluation between their output nodes; ``tapead.scaly.control.lowering``)
LOWERINGS: Dict[str, Callable[..., Any]] = {}


def _tape_value(value: np.ndarray) -> Any:
    """Scalars go on the tape unboxed (the C fast path)."""
    if value.ndim == 0 and value.dtype == np.float64:
        return float(value)
    # np.ascontiguousarray would make a 0-d value 1-d (an int scalar input)
    return value if value.flags.c_contiguous else np.array(value, order="C")


def _result(value: Any, dtype: np.dtype) -> Any:
    """A plain numpy result: np.float64 / np.bool_ scalars or an owned array."""
    if np.ndim(value) == 0:
        return dtype.type(value)
    return np.array(value, dtype=dtype)


def _converter(dtype: np.dtype, on_tape: bool, ref: Any) -> Callable[[Any], Any]:
    """How one output's tape value becomes its result (chosen once)."""
    if on_tape and dtype == np.float64:
        return lambda v: np.float64(v) if type(v) is float else _result(v, dtype)
    if on_tape:
        return lambda v: _result(v, dtype)
    return lambda v: _result(ref, dtype)        # constant: a fresh copy each call


def _fresh_array(value: np.ndarray) -> np.ndarray:
    """A ``scaly_pack`` output: a new float64 array at every replay, no copy."""
    return value


def _packs(tape: Tape, i: int) -> bool:
    """Whether node ``i`` is a ``scaly_pack`` node."""
    try:
        return tape.record(i).prim is pack_p
    except ValueError:                          # a scalar node has no record
        return False


def free_inputs(outputs: Sequence[Expr], inputs: Sequence[Expr]) -> List[Expr]:
    """Input nodes the outputs depend on that are not among ``inputs``."""
    known = {i.id for i in inputs}
    return [n for n in topo_order(outputs) if n.op == "input" and n.id not in known]


# ---------------------------------------------------------------------------
# element-by-element values
# ---------------------------------------------------------------------------

def _pack_impl(*scalars, shape):
    return np.array(scalars, dtype=np.float64).reshape(shape)


#: scalars -> one float64 array of ``shape`` (C order): how elementwise
#: values become an array on the tape.
pack_p = Primitive("scaly_pack", _pack_impl, saves=())
pack_p.defvjp_any(lambda k, g, ans, *xs, shape: tnp.reshape(g, (-1,))[k])
pack_p.defbatched(PER_DIRECTION)
pack_p.defsparsity(patterns.MOVE)                  # element k is scalar k


class _Elements:
    """A float64 array during lowering, kept element by element.

    ``items`` maps flat (C order) positions to scalar tape values (tracers
    or numbers); missing positions are zero.
    """

    __slots__ = ("shape", "size", "items")

    def __init__(self, shape, items: Dict[int, Any]):
        self.shape = tuple(shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.items = items


def _is_zero(v: Any) -> bool:
    return type(v) is float and v == 0.0


def _merge(a: _Elements, b: _Elements, own_a: bool, sign: float) -> _Elements:
    """``a + b`` (``sign`` 1) or ``a - b`` (-1); ``own_a``: a's map may be reused."""
    items = a.items if own_a else dict(a.items)
    for k, v in b.items.items():
        if k in items:
            items[k] = tnp.add(items[k], v) if sign > 0 else tnp.subtract(items[k], v)
        else:
            items[k] = v if sign > 0 else tnp.negative(v)
    return _Elements(a.shape, items)


def _spread_inputs(inputs: Sequence[Expr], order: Sequence[Expr]) -> Dict[int, bool]:
    """Input node id -> whether its whole array is needed too, for the float64
    inputs fed element by element."""
    gathered: Dict[int, set] = {}
    whole: Dict[int, bool] = {}
    ids = {node.id for node in inputs if node.dtype == np.float64 and node.ndim >= 1}
    for node in order:
        for o in node.operands:
            if o.id in ids:
                if node.op == "gather":
                    gathered.setdefault(o.id, set()).update(node.attrs["indices"])
                else:
                    whole[o.id] = True
    out = {}
    for node in inputs:
        picked = gathered.get(node.id)
        if picked and (node.size <= SPREAD_ALWAYS or len(picked) >= SPREAD_SHARE * node.size):
            out[node.id] = whole.get(node.id, False)
    return out


class LoweredProgram:
    """A DAG recorded on a tapead tape at some input values.

    Parameters
    ----------
    inputs : list of Expr
        Input nodes, each fed to the tape as one input (its array) or, when
        indexed elementwise, one scalar input per element (and its array
        when an op needs it whole).
    outputs : list of Expr
    values : list of numpy arrays
        Where the tape is first recorded.
    elementwise : bool
        Lower scalar code over small vectors element by element (see the
        module's docstring).  Off, every input is one tape input, in order,
        and every op records its ``fn`` (what tape analyses such as sparsity
        patterns expect).
    """

    def __init__(self, inputs: Sequence[Expr], outputs: Sequence[Expr],
                 values: Sequence[np.ndarray], elementwise: bool = False):
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.tape = Tape()
        self._lock = threading.Lock()
        order = topo_order(self.outputs)
        spread = _spread_inputs(self.inputs, order) if elementwise else {}
        self._elementwise_ops = elementwise
        # per Function input: (fed whole, fed elementwise)
        self._feed = [(node.id not in spread or spread[node.id], node.id in spread)
                      for node in self.inputs]
        self._spread = bool(spread)
        # Tape.evaluate's spread counts, one per value _tape_inputs passes
        self._counts = [c for node, (whole, elementwise) in zip(self.inputs, self._feed)
                        for c in ([0] if whole else []) + ([node.size] if elementwise else [])]
        uses: Dict[int, int] = {}
        for node in order:
            for o in node.operands:
                uses[o.id] = uses.get(o.id, 0) + 1
        for node in self.outputs:
            uses[node.id] = uses.get(node.id, 0) + 1
        env: Dict[int, Any] = {}
        self._dense_of: Dict[int, Any] = {}
        try:
            for node, value, (whole, elementwise) in zip(self.inputs, values, self._feed):
                if whole:
                    env[node.id] = self.tape.input(_tape_value(value))
                if elementwise:
                    if whole:
                        self._dense_of[node.id] = env[node.id]
                    flat = np.asarray(value, dtype=np.float64).ravel().tolist()
                    env[node.id] = _Elements(node.shape, dict(enumerate(
                        self.tape.input_many(flat))))
            for node in order:
                if node.id in env:
                    continue
                if node.op == "input":
                    raise LayoutError(f"the graph depends on input '{node.attrs['name']}', "
                                      "which is not an input of the Function")
                if node.op == "const":
                    env[node.id] = _tape_value(node.attrs["value"])
                    continue
                value = self._elementwise(node, env, uses)
                if isinstance(value, _Elements) and value.shape == ():
                    value = value.items.get(0, 0.0)     # one element: a scalar, as gather gives
                if value is None:
                    args = [self._dense(o, env) for o in node.operands]
                    special = LOWERINGS.get(node.op)
                    value = (OPS[node.op].fn(*args, **node.attrs) if special is None
                             else special(self, node, args))
                env[node.id] = value
            results = [self._dense(node, env) for node in self.outputs]
        finally:
            self.tape.active = False
        self._slots = []
        for v in results:
            if isinstance(v, Tracer) and v.tape is self.tape:
                self._slots.append((True, v.idx))
            else:
                self._slots.append((False, _core.primal_of(v) if isinstance(v, Tracer) else v))
        self._ids = [ref if on_tape else -1 for on_tape, ref in self._slots]
        self._convert = [_converter(node.dtype, on_tape, ref)
                         for (on_tape, ref), node in zip(self._slots, self.outputs)]
        for k, i in enumerate(self._ids):        # packed outputs are new arrays each call
            if i >= 0 and self._ids.index(i) == k and _packs(self.tape, i):
                self._convert[k] = _fresh_array
        self._one_float = (len(self._ids) == 1 and self._ids[0] >= 0
                           and self.outputs[0].dtype == np.float64)
        self._pack: Optional[Callable[[List[Any]], Any]] = None
        self.takes_args = False
        self._fresh = True

    # -- lowering ----------------------------------------------------------
    def _elementwise(self, node: Expr, env: Dict[int, Any], uses: Dict[int, int]) -> Any:
        """The value of ``node`` computed element by element, or None when
        the op is not one that keeps elements (or its operands are arrays)."""
        if not self._elementwise_ops or node.dtype != np.float64:
            return None
        op, attrs = node.op, node.attrs
        vals = [env[o.id] for o in node.operands]
        if op == "gather" and isinstance(vals[0], _Elements):
            items = vals[0].items
            if attrs["shape"] == ():
                return items.get(attrs["indices"][0], 0.0)
            return _Elements(attrs["shape"], {j: items[i] for j, i in
                                              enumerate(attrs["indices"]) if i in items})
        if op == "scatter":
            (x,), (v,) = node.operands, vals
            if x.shape == () and x.dtype == np.float64:
                pieces = {0: v} if not _is_zero(v) else {}
            elif isinstance(v, _Elements):
                pieces = v.items
            else:
                return None
            items: Dict[int, Any] = {}
            for j, i in enumerate(attrs["indices"]):
                if j in pieces:
                    items[i] = tnp.add(items[i], pieces[j]) if i in items else pieces[j]
            return _Elements(attrs["shape"], items)
        if op in ("add", "sub") and all(isinstance(v, _Elements) and v.shape == node.shape
                                        for v in vals):
            a, b = node.operands
            return _merge(vals[0], vals[1], uses.get(a.id) == 1 and a is not b,
                          1.0 if op == "add" else -1.0)
        if op == "neg" and isinstance(vals[0], _Elements):
            return _Elements(node.shape, {k: tnp.negative(v)
                                          for k, v in vals[0].items.items()})
        if op == "reshape" and isinstance(vals[0], _Elements):
            return _Elements(node.shape, dict(vals[0].items))
        if op == "stack" and node.ndim == 1 and all(
                o.shape == () and o.dtype == np.float64 for o in node.operands):
            return _Elements(node.shape, {k: v for k, v in enumerate(vals) if not _is_zero(v)})
        return None

    def _dense(self, node: Expr, env: Dict[int, Any]) -> Any:
        """``node``'s value as a tape value (elementwise values packed once)."""
        value = env[node.id]
        if not isinstance(value, _Elements):
            return value
        dense = self._dense_of.get(node.id)
        if dense is None:
            flat = [value.items.get(k, 0.0) for k in range(value.size)]
            if any(isinstance(v, _core.Box) for v in flat):
                dense = _core.bind(pack_p, *flat, shape=value.shape)
            else:
                dense = _pack_impl(*flat, shape=value.shape)
            self._dense_of[node.id] = dense
        return dense

    # -- evaluation --------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        """Nodes of the recorded tape."""
        return self.tape.n_nodes

    def _tape_inputs(self, args: Sequence[Any]) -> Optional[List[Any]]:
        """``Tape.evaluate``'s values for the Function's ``args`` (spread by
        ``self._counts``), or None if an input fed element by element is not an
        array of its shape."""
        if not self._spread:
            return args
        if len(args) != len(self.inputs):
            return None
        out: List[Any] = []
        for a, node, (whole, elementwise) in zip(args, self.inputs, self._feed):
            if whole:
                out.append(a)
            if elementwise:
                if type(a) is not np.ndarray or a.shape != node.shape:
                    return None
                out.append(a)
        return out

    def _evaluate(self, feed: Optional[Sequence[Any]]) -> Optional[List[Any]]:
        if feed is None:
            return None
        return self.tape.evaluate(feed, self._ids, self._counts if self._spread else None)

    def __call__(self, values: Sequence[np.ndarray]) -> List[Any]:
        """The outputs at ``values`` (checked arrays of the input leaves' shapes
        and dtypes); the first call reuses the recording.  Calls from several
        threads take turns: the tape holds one set of values at a time."""
        with self._lock:
            return self._call(values)

    def _call(self, values: Sequence[np.ndarray]) -> List[Any]:
        if self._fresh:
            self._fresh = False
            raw = [self.tape.value(i) if i >= 0 else None for i in self._ids]
        else:
            raw = self._evaluate(self._tape_inputs(values))
            if raw is None:                 # not exact (e.g. a 0-d int64 for a float)
                feed = []
                for v, count in zip(self._tape_inputs(values), self._counts or repeat(0)):
                    feed.extend(v.ravel().tolist() if count else [_tape_value(v)])
                self.tape.replay(feed, partials=False)
                raw = [self.tape.value(i) if i >= 0 else None for i in self._ids]
        return [convert(v) for convert, v in zip(self._convert, raw)]

    def output_node(self, k: int) -> int:
        """Tape node id of output ``k``, or -1 when it does not depend on an
        input (a constant)."""
        return self._ids[k]

    def set_packing(self, pack: Callable[[List[Any]], Any], takes_args: bool) -> None:
        """Enable ``run_exact``: ``pack(outputs)`` is the caller's result;
        ``takes_args``: the caller's arguments are the inputs, one each."""
        self._pack = pack
        self.takes_args = takes_args

    def run_exact(self, args: Sequence[Any]) -> Any:
        """``pack(outputs)`` at ``args`` (one per input), or ``None`` when an
        argument is not exactly of its input's kind (see ``Tape.evaluate``) or
        packing is not set; nothing is converted or validated here."""
        if self._pack is None or self._fresh:
            return None
        with self._lock:
            return self._run_exact(args)

    def _run_exact(self, args: Sequence[Any]) -> Any:
        raw = self._evaluate(self._tape_inputs(args) if self._spread else args)
        if raw is None:
            return None
        if self._one_float and type(raw[0]) is float:
            return self._pack([np.float64(raw[0])])
        return self._pack([convert(v) for convert, v in zip(self._convert, raw)])
