"""Evaluating loops, branches, custom calls and prints on the tape.

A loop node of the expression graph (``expr.scan``, ``expr.while_loop``,
``expr.cond``, ``expr.custom_call``; see ``tapead.scaly.control.loops``) has one
node per output, all sharing a ``LoopSpec``.  Lowering records them as one
object node of the tape (``scaly_loop``: runs the whole loop, returning a
``LoopResult``) followed by one ``scaly_loop_pick`` node per output used, so
the loop runs once however many of its outputs the program reads.  The
tape's re-evaluation (``Tape.evaluate``) calls ``scaly_loop`` again, which
runs the body once per executed step: a scan whose body is float64 values
and array ops that ``tapead.scaly.control.scalarize`` can rewrite as scalar
operations runs its steps in C on that scalar tape (``_core.scalar_scan``,
no Python per step), and so does such a while loop whose condition is one
comparison of two float scalars (``_core.scalar_while``); any other body is stepped from Python, one
``Tape.evaluate`` of its own tape per step (``Stepper``; no tracing, no
argument checks).

The trajectory (the carries entering each step) is stored only when an
output of the program reads it, which is what reverse mode asks for.  A
checkpointed backward loop (``run_checkpointed``) stores at most
``checkpoints`` carries and recomputes the others, in C when both bodies
scalarize (``tapead.scaly.control.scalar``), else from Python.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Set, Tuple

import numpy as np

from tapead import _core
from tapead import patterns as _patterns
from tapead.online import OnlineChain
from tapead._prims.base import PER_DIRECTION, Primitive
from tapead.scaly.expr import Expr
from tapead.scaly.graphs import topo_order
from tapead.scaly.lower import LOWERINGS
from tapead.checkpointing import reverse_with_checkpoints
from tapead.scaly.control.scalar import (run_checkpointed_steps, run_online_reverse_steps,
                                      run_scan_steps, run_while_online_steps, run_while_steps)


class LoopResult:
    """Every output value of one evaluation of a loop node (opaque to the tape)."""

    __slots__ = ("values",)
    shape = ()                          # what the tape's bookkeeping asks of a value
    dtype = np.dtype(object)
    nbytes = 0

    def __init__(self, values: List[Any]):
        self.values = values


class Snapshots:
    """The carries a checkpointed while loop stored as it ran
    (``tapead.online.OnlineChain`` after its forward sweep; opaque to the tape)."""

    __slots__ = ("chain",)
    shape = ()
    dtype = np.dtype(object)
    nbytes = 0

    def __init__(self, chain):
        self.chain = chain


#: ``want_traj`` of a checkpointed while loop whose stored carries (and not
#: its trajectory) a program reads
SNAPSHOTS = "snapshots"


# ---------------------------------------------------------------------------
# running a loop on numbers
# ---------------------------------------------------------------------------

def _arr(value: Any, ttype) -> np.ndarray:
    return np.asarray(_core.concrete(value), dtype=ttype.dtype).reshape(ttype.shape)


def _exact(value: Any) -> Any:
    """A value in the kind a body's tape takes without conversion: a float for
    a float64 scalar, else an ndarray."""
    if type(value) is float:
        return value
    a = np.asarray(value)
    return float(a) if a.ndim == 0 and a.dtype == np.float64 else a


class Stepper:
    """Calls one Function once per step with as little work as possible.

    Once the Function has a lowered program, a step is one ``Tape.evaluate``
    of its tape on the values as they are (floats and arrays of the declared
    kinds); an argument of another kind falls back to ``Function.evaluate``,
    which converts and checks.
    """

    __slots__ = ("fn", "_prog", "_consts")

    def __init__(self, fn):
        self.fn, self._prog, self._consts = fn, None, None

    def __call__(self, args: List[Any]) -> List[Any]:
        prog = self._prog
        if prog is None:
            prog = self.fn._programs.get(True)
            if prog is None or prog._fresh:
                return [_exact(v) for v in self.fn.evaluate(args)]
            self._prog = prog
            self._consts = [None if on_tape else _exact(ref) for on_tape, ref in prog._slots]
        with prog._lock:
            raw = prog._evaluate(prog._tape_inputs(args) if prog._spread else args)
        if raw is None:
            return [_exact(v) for v in self.fn.evaluate(args)]
        return [c if r is None else r for r, c in zip(raw, self._consts)]


def _slice(flat: np.ndarray, leaf_type, start: int, stride: int, k: int) -> Any:
    first = start + k * stride
    if leaf_type.shape == () and flat.dtype == np.float64:
        return float(flat[first])
    return flat[first:first + leaf_type.size].reshape(leaf_type.shape)


def _step_inputs(spec, carries, k, xs_flat) -> List[Any]:
    args = list(carries)
    if spec.index:
        args.append(np.array(k, dtype=np.int64))
    for flat, ttype, (start, stride) in zip(xs_flat, spec.xs_types, spec.windows):
        args.append(_slice(flat, ttype, start, stride, k))
    return args


def _operands(values: Sequence[Any], types) -> List[np.ndarray]:
    return [np.asarray(_core.concrete(v), dtype=t.dtype).reshape(-1)
            for v, t in zip(values, types)]


def run_checkpointed(spec, values: Sequence[Any]) -> List[Any]:
    """A checkpointed backward loop (``tapead.scaly.control.checkpoints``):
    the primal steps are recomputed from at most ``spec.checkpoints`` stored
    carries (revolve) and reversed one by one, last executed step first."""
    primal, nb = spec.recompute, spec.n_carry
    pos = nb + (1 if spec.has_trip else 0)
    L = primal.length
    trip = L if not spec.has_trip else int(np.clip(int(np.asarray(
        _core.concrete(values[nb]))), 0, L))
    init = [_exact(_arr(v, t)) for v, t in zip(values[pos:pos + primal.n_carry],
                                                 primal.carry_types)]
    rest = values[pos + primal.n_carry:]
    flats = _operands(rest, spec.xs_types[primal.n_carry:])
    windows = spec.windows[primal.n_carry:]
    types = spec.xs_types[primal.n_carry:]
    primal_flat = flats[:len(primal.xs_types)]
    ys = [np.zeros((L,) + t.shape, t.dtype) for t in spec.y_types]
    forward_body, backward_body = Stepper(primal.body), Stepper(spec.body)

    def step_of(i: int) -> int:                 # the i-th executed step
        return trip - 1 - i if primal.reverse else i

    def forward_step(state, i):
        return forward_body(_step_inputs(primal, state, step_of(i), primal_flat))[
            :primal.n_carry]

    def backward_step(state, i, adjoint):
        k = step_of(i)
        args = list(adjoint) + ([np.array(k, dtype=np.int64)] if spec.index else [])
        args += list(state)
        args += [_slice(f, t, start, stride, k)
                 for f, t, (start, stride) in zip(flats, types, windows)]
        outs = backward_body(args)
        for j in range(len(ys)):
            ys[j][k] = outs[nb + j]
        return outs[:nb]

    seed = [_exact(_arr(v, t)) for v, t in zip(values[:nb], spec.carry_types)]
    if primal.op == "scan":
        adjoint = run_checkpointed_steps(spec, init, trip, flats, seed, ys)
        if adjoint is not None:
            return ([np.asarray(a, dtype=t.dtype) for a, t in zip(adjoint, spec.carry_types)]
                    + ys + [None] * nb)
    if primal.op == "while_loop":
        stored = values[-1]
        adjoint = None
        if isinstance(stored, Snapshots) and stored.chain.n == trip:
            adjoint = run_online_reverse_steps(spec, stored.chain.stored_states(), trip,
                                               flats, seed, ys)
        elif not isinstance(stored, Snapshots):   # a tangent loop's: the count is known
            adjoint = run_checkpointed_steps(spec, init, trip, flats, seed, ys)
        if adjoint is None:
            adjoint = _reverse_online(spec, stored, forward_step, backward_step, init, trip,
                                      seed)
    else:
        _, adjoint, _ = reverse_with_checkpoints(forward_step, backward_step, init, trip,
                                                 max(1, spec.checkpoints), seed)
    return ([np.asarray(a, dtype=t.dtype) for a, t in zip(adjoint, spec.carry_types)]
            + ys + [None] * nb)


def _reverse_online(spec, stored, forward_step, backward_step, init, trip, seed):
    """Reverse a checkpointed while loop's ``trip`` steps from the carries its
    forward run stored (``stored``, a ``Snapshots``); when that run stored the
    whole trajectory instead (higher derivatives), the online schedule runs
    again from ``init`` first."""
    if isinstance(stored, Snapshots) and stored.chain.n == trip:
        chain = stored.chain.replay(forward_step)
    else:
        chain = OnlineChain(forward_step, init, spec.checkpoints)
        chain.forward(lambda state: True, max_steps=trip)
    return chain.reverse(backward_step, seed)


def run_scan(spec, values: Sequence[Any], want_traj: bool) -> List[Any]:
    """All outputs of a scan: final carries, stacked outputs, trajectories."""
    if spec.recompute is not None:
        return run_checkpointed(spec, values)
    nc, L = spec.n_carry, spec.length
    carries = [_exact(_arr(v, t)) for v, t in zip(values[:nc], spec.carry_types)]
    pos = nc
    trip = L
    if spec.has_trip:
        trip = int(np.clip(int(np.asarray(_core.concrete(values[pos]))), 0, L))
        pos += 1
    xs_flat = _operands(values[pos:], spec.xs_types)
    ys = [np.zeros((L,) + t.shape, t.dtype) for t in spec.y_types]
    traj = ([np.zeros((L,) + t.shape, t.dtype) for t in spec.carry_types]
            if want_traj else [None] * nc)
    steps = range(trip - 1, -1, -1) if spec.reverse else range(trip)
    step = Stepper(spec.body)
    if trip > 0:
        done = run_scan_steps(spec, carries, steps, xs_flat, ys, traj)
        if done is not None:
            carries, steps = done, ()
    for k in steps:
        if want_traj:
            for j in range(nc):
                traj[j][k] = carries[j]
        outs = step(_step_inputs(spec, carries, k, xs_flat))
        carries = outs[:nc]
        for j in range(len(ys)):
            ys[j][k] = outs[nc + j]
    return [np.asarray(c, dtype=t.dtype) for c, t in zip(carries, spec.carry_types)] \
        + ys + traj


def run_while(spec, values: Sequence[Any], want_traj: bool) -> List[Any]:
    """All outputs of a while loop: final carries, the count, trajectories."""
    nc, L = spec.n_carry, spec.length
    carries = [_exact(_arr(v, t)) for v, t in zip(values[:nc], spec.carry_types)]
    xs_flat = _operands(values[nc:], spec.xs_types)
    if want_traj == SNAPSHOTS:
        return _run_while_online(spec, carries, xs_flat)
    traj = ([np.zeros((L,) + t.shape, t.dtype) for t in spec.carry_types]
            if want_traj else [None] * nc)
    extra = [] if spec.snapshot_output is None else [None]
    done = run_while_steps(spec, carries, xs_flat, traj) if L > 0 else None
    if done is not None:
        carries, count = done
        return [np.asarray(c, dtype=t.dtype) for c, t in zip(carries, spec.carry_types)] \
            + [np.int64(count)] + traj + extra
    count = 0
    cond, step = Stepper(spec.cond), Stepper(spec.body)
    while count < L:
        args = _step_inputs(spec, carries, count, xs_flat)
        if not bool(cond(args)[0]):
            break
        if want_traj:
            for j in range(nc):
                traj[j][count] = carries[j]
        carries = step(args)
        count += 1
    return [np.asarray(c, dtype=t.dtype) for c, t in zip(carries, spec.carry_types)] \
        + [np.int64(count)] + traj + extra


def _run_while_online(spec, carries, xs_flat) -> List[Any]:
    """A checkpointed while loop run for reverse mode: at most
    ``spec.checkpoints`` carries are stored, placed by the online schedule
    (``tapead.online.OnlineChain``), and returned as its last output."""
    cond, step = Stepper(spec.cond), Stepper(spec.body)
    run = [0]                                   # steps run so far (the step number)

    def forward_step(state, k):
        run[0] = k + 1
        return step(_step_inputs(spec, state, k, xs_flat))

    done = run_while_online_steps(spec, carries, xs_flat)
    if done is not None:                        # stepped in C under the same rule
        final, n, stored = done
        chain = OnlineChain.from_stored(forward_step, stored, final, n, spec.checkpoints)
    else:
        chain = OnlineChain(forward_step, carries, spec.checkpoints)
        final = chain.forward(lambda state: bool(cond(_step_inputs(spec, state, run[0],
                                                                   xs_flat))[0]),
                              max_steps=spec.length)
    n = chain.n
    return ([np.asarray(c, dtype=t.dtype) for c, t in zip(final, spec.carry_types)]
            + [np.int64(n)] + [None] * spec.n_carry + [Snapshots(chain)])


def branch_index(selector: Any, n: int) -> int:
    """The branch a selector picks: a bool is 0 or 1, an int is clamped to [0, n)."""
    s = np.asarray(_core.concrete(selector))
    k = int(bool(s)) if s.dtype == np.bool_ else int(s)
    return min(max(k, 0), n - 1)


def run_cond(spec, values: Sequence[Any], want_traj: bool) -> List[Any]:
    """The outputs of the selected branch (only that branch runs)."""
    fn = spec.branches[branch_index(values[0], len(spec.branches))]
    return list(fn.evaluate([_arr(v, t) for v, t in zip(values[1:], spec.xs_types)]))


def run_custom(spec, values: Sequence[Any], want_traj: bool) -> List[Any]:
    """The outputs of the Function whose derivative is custom."""
    return list(spec.body.evaluate([_arr(v, t) for v, t in zip(values, spec.xs_types)]))


RUNNERS = {"scan": run_scan, "while_loop": run_while, "cond": run_cond,
           "custom_call": run_custom}


def run(spec, values: Sequence[Any], want_traj: bool = False) -> List[Any]:
    """Every output of ``spec``'s node at operand ``values`` (numbers)."""
    return RUNNERS[spec.op](spec, values, want_traj)


def _tape_result(value: Any) -> Any:
    """A float64 scalar goes on the tape as a Python float (the C fast path)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == np.float64:
        return float(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _loop_impl(*values, spec, want_traj):
    return LoopResult(run(spec, values, want_traj))


def _pick_impl(result, *operands, spec, output):
    return _tape_result(result.values[output])


#: runs a whole loop (or branch): its value is a LoopResult
loop_p = Primitive("scaly_loop", _loop_impl, saves=())
#: one output of a loop; the loop's operands are passed again only so that
#: sparsity patterns can follow them
pick_p = Primitive("scaly_loop_pick", _pick_impl, saves=())


# ---------------------------------------------------------------------------
# lowering: one tape node per loop, one per output used
# ---------------------------------------------------------------------------

def _loop_key(node: Expr) -> Tuple[int, Tuple[int, ...]]:
    return (id(node.attrs["spec"]), tuple(o.id for o in node.operands))


def _uses(program) -> Dict[Tuple, Set[int]]:
    """Loop key -> the outputs of that loop the program reads (computed once)."""
    uses = program.__dict__.get("_loop_uses")
    if uses is None:
        uses = {}
        for node in topo_order(program.outputs):
            if node.op in RUNNERS:
                uses.setdefault(_loop_key(node), set()).add(node.attrs["output"])
        program._loop_uses = uses
    return uses


def _placeholder(ttype) -> Any:
    """A value of ``ttype`` away from special values (as sparsity's inputs)."""
    if ttype.dtype != np.float64:
        return np.ones(ttype.shape, ttype.dtype)
    k = np.arange(1, ttype.size + 1, dtype=np.float64)
    return (0.5 + 0.25 * np.sin(k)).reshape(ttype.shape)


def _structure_impl(*values, spec, want_traj):
    """What a loop records when a program is lowered only for its structure
    (sparsity patterns): placeholders of the output types, nothing runs."""
    return LoopResult([_placeholder(t) for t in spec.out_types])


#: a loop in a program lowered for its structure only (placeholder outputs)
structure_p = Primitive("scaly_loop", _structure_impl, saves=())


def _for_structure(program) -> bool:
    """Whether ``program`` is lowered for tape analyses only (sparsity
    patterns), never evaluated: loops need not run, prints stay silent."""
    return not program._elementwise_ops


def _wants(spec, wanted) -> Any:
    """``want_traj`` for a loop whose outputs ``wanted`` are read: True when a
    trajectory is, else ``SNAPSHOTS`` when a checkpointed while loop's stored
    carries are, else False."""
    snap = spec.snapshot_output
    if any(k >= spec.traj_offset and k != snap for k in wanted):
        return True
    return SNAPSHOTS if snap in wanted else False


def lower_loop(program, node: Expr, args: List[Any]) -> Any:
    """``LOWERINGS`` entry of every loop op: run the loop once per program."""
    spec = node.attrs["spec"]
    key = _loop_key(node)
    memo = program.__dict__.setdefault("_loop_memo", {})
    result = memo.get(key)
    if result is None:
        wanted = _uses(program).get(key, {node.attrs["output"]})
        want_traj = _wants(spec, wanted)
        prim = structure_p if _for_structure(program) else loop_p
        if any(isinstance(a, _core.Box) for a in args):
            result = _core.bind(prim, *args, spec=spec, want_traj=want_traj)
        else:
            result = prim.impl(*args, spec=spec, want_traj=want_traj)
        memo[key] = result
    if isinstance(result, LoopResult):
        return _tape_result(result.values[node.attrs["output"]])
    return _core.bind(pick_p, result, *args, spec=spec, output=node.attrs["output"])


for _op in RUNNERS:
    LOWERINGS[_op] = lower_loop


def eval_fn(*values, spec, output, **display):
    """The op table's ``fn`` of loop nodes (one output, evaluated on its own)."""
    want = _wants(spec, {output})
    return run(spec, [_core.concrete(v) for v in values], want)[output]


# ---------------------------------------------------------------------------
# sc.print
# ---------------------------------------------------------------------------

def format_value(value: Any) -> str:
    """How ``sc.print`` shows a value: ``1`` for 1.0, ``0.5``, ``[1, 2.5]``."""
    a = np.asarray(_core.concrete(value))
    if a.ndim == 0:
        v = a.item()
        if isinstance(v, float):
            return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
        return str(v)
    if a.ndim == 1:
        return "[" + ", ".join(format_value(v) for v in a) + "]"
    return "[" + ", ".join(format_value(row) for row in a) + "]"


def _print_impl(x, fmt):
    print(fmt.format(format_value(x)))
    return x


#: prints its operand when the program computes it, and returns it
print_p = Primitive("scaly_print", _print_impl, saves=())


def print_fn(x, fmt):
    """The op table's ``fn`` of ``expr.print``."""
    if isinstance(x, _core.Box):
        return _core.bind(print_p, x, fmt=fmt)
    return _print_impl(x, fmt)


def lower_print(program, node: Expr, args: List[Any]) -> Any:
    """A print prints when the program runs, not when it is analysed."""
    return args[0] if _for_structure(program) else print_fn(args[0], **node.attrs)


LOWERINGS["print"] = lower_print


# ---------------------------------------------------------------------------
# sparsity patterns on the tape
# ---------------------------------------------------------------------------

def _pick_sparsity(rec, pats, shapes, out_shape, N):
    """A scan output's pattern propagated step by step
    (``tapead.scaly.control.patterns``); a branch output's is the union over
    branches of what each branch reads; any other loop output depends on
    everything its operands do (a superset)."""
    from tapead.scaly.control import patterns  # cycle: scaly -> scaly.control.loops -> here
    spec, k = rec.params["spec"], rec.params["output"]
    operand_pats = pats[1:]
    size = int(np.prod(out_shape, dtype=np.int64))
    if patterns.supported(spec):
        return patterns.scan_patterns(spec, operand_pats, N)[k]
    if spec.op == "cond":
        import scipy.sparse as sp
        out = sp.csr_array((size, N))
        for j, P in enumerate(spec.branch_patterns(k)):
            if P is not None and operand_pats[1 + j] is not None:
                out = out + sp.csr_array(P, dtype=float) @ operand_pats[1 + j]
        return out
    return _patterns._dense_rule(rec, operand_pats, shapes[1:], out_shape, N)


def _print_sparsity(rec, pats, shapes, out_shape, N):
    """A print is the identity on its value."""
    if pats[0] is None:
        return _patterns._empty(int(np.prod(out_shape, dtype=np.int64)), N)
    return pats[0]


# the loop node returns a LoopResult (no values of its own); its picks carry the
# dependences; tape-level batched JVPs run one pass per direction (the graph API
# batches loops itself, tapead.scaly.control.batched)
for _prim in (loop_p, structure_p):
    _prim.defsparsity(_patterns.ZERO)
    _prim.defbatched(PER_DIRECTION)
pick_p.defsparsity(_pick_sparsity)
pick_p.defbatched(PER_DIRECTION)
print_p.defsparsity(_print_sparsity)
print_p.defbatched(PER_DIRECTION)
