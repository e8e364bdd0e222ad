"""The graph API's loops whose bodies run in C.

A loop body (a Function) whose values are float64 and whose graph
``tapead.scaly.control.scalarize`` rewrites as scalar operations is recorded
once on an all-scalar tape; the loop's steps then replay that tape in C, with no
Python per step (``_core``'s one scalar-body replay, ``_core_loop.pxi``):

* ``run_scan_steps``: the steps of a scan (``_core.scalar_scan``);
* ``run_while_steps``: a while loop whose condition is one comparison of two
  float scalars (``_core.scalar_while``);
* ``run_checkpointed_steps``: the backward loop of ``sc.scan(...,
  checkpoints=s)``, the primal steps recomputed from at most ``s`` stored
  carries under revolve and each executed step reversed by the backward
  body (``_core.scalar_scan_checkpointed``);
* ``run_while_online_steps`` and ``run_online_reverse_steps``: the same for
  ``sc.while_loop(..., checkpoints=s)``, its forward run storing carries by
  the online rule (``_core.scalar_while_online``) and its backward loop
  reversing the segments between them.

Each returns None (nothing done) when its loop cannot run there; the caller
(``tapead.scaly.control.lowering``) then steps the body from Python.

A body that has run twice (with at least ``MIN_WORK`` steps x nodes) is
compiled to C in the background (``tapead.compiler.bodies``, the code
``ta.jit`` gives its loops): a scan then runs as one compiled loop over its
steps, and a while loop or a checkpointed sweep calls the compiled step --
the same bits as walking the tape.
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from tapead import _core
from tapead import _revolve
from tapead.checkpointing import optimal_forward_steps
from tapead.compiler import eager
from tapead.compiler.bodies import PARTS
from tapead.online import online_forward_steps
from tapead.scaly.control.spec import make_function
from tapead.scaly.control.scalarize import scalarize

__all__ = ["program_of", "scan_plan", "run_scan_steps", "scan_in_c", "while_plan",
           "run_while_steps", "run_checkpointed_steps", "run_while_online_steps",
           "run_online_reverse_steps"]


def program_of(fn, values: List[float]) -> Any:
    if fn._programs.get(True) is None:                  # record it once
        fn.evaluate(values)
    prog = fn._programs.get(True)
    return None if prog is None or prog._spread else prog


def scan_plan(spec) -> Any:
    """The scan's body rewritten as scalar operations (``scalarize``; the step
    number, if any, as a float), when every carry, per-step input and output
    is float64; else None.  Built once per loop."""
    if "scalar_plan" not in spec._derived:
        plan = None
        if all(t.dtype == np.float64 for t in spec.carry_types + spec.xs_types +
               spec.y_types):
            index = [spec.body.inputs[spec.n_carry].id] if spec.index else []
            plan = scalarize(spec.body, as_float=index)
        spec._derived["scalar_plan"] = plan
    return spec._derived["scalar_plan"]


def run_scan_steps(spec, carries, steps, xs_flat, ys, traj) -> Any:
    """Run ``steps`` of a scan in C (``_core.scalar_scan``) on its scalarized
    body: the final carries, or None (nothing done) when the body cannot run
    there (its tape has array or Python-ruled nodes)."""
    fn = scan_plan(spec)
    if fn is None:
        return None
    L = spec.length
    carry = _flat(carries)
    xs = np.empty((L, (1 if spec.index else 0) + sum(t.size for t in spec.xs_types)))
    col = 0
    if spec.index:
        xs[:, 0] = np.arange(L)                     # the step number
        col = 1
    for flat, t, (start, stride) in zip(xs_flat, spec.xs_types, spec.windows):
        if t.size == 1 and stride > 0:
            xs[:, col] = flat[start::stride][:L]
        elif L:
            xs[:, col:col + t.size] = _windows(flat, start, stride, L, t.size)
        col += t.size
    order = (np.arange(steps.start, steps.stop, steps.step, dtype=np.intp)
             if isinstance(steps, range) else np.asarray(steps, dtype=np.intp))
    prog = fn._programs.get(True)
    if prog is None or prog._spread:
        prog = program_of(fn, list(carry) + list(xs[order[0]]))    # recorded at step one
    if prog is None:
        return None
    ny = sum(t.size for t in spec.y_types)
    y = np.zeros((L, ny), dtype=np.float64)
    keep = spec.n_carry > 0 and traj[0] is not None
    t = np.zeros((L if keep else 0, carry.size), dtype=np.float64)
    try:
        scan_in_c(prog, carry, xs, y, t, order)
    except ValueError:
        spec._derived["scalar_plan"] = None        # not all scalar: step from Python
        return None
    every = len(order) == L                         # every row: no gathers

    def rows_to(dest, values, shape):
        if every:
            dest[...] = values.reshape((L,) + shape)
        else:
            dest[order] = values[order].reshape((len(order),) + shape)
    col = 0
    for j, yt in enumerate(spec.y_types):
        rows_to(ys[j], y[:, col:col + yt.size], yt.shape)
        col += yt.size
    out, col = [], 0
    for j, ct in enumerate(spec.carry_types):
        if keep:
            rows_to(traj[j], t[:, col:col + ct.size], ct.shape)
        value = carry[col:col + ct.size].reshape(ct.shape)
        out.append(float(value) if ct.shape == () else value)
        col += ct.size
    return out


def _windows(flat: np.ndarray, start: int, stride: int, L: int, size: int) -> np.ndarray:
    """(L, size): row k is ``flat[start + k * stride:][:size]``."""
    step = flat.strides[0] if flat.ndim == 1 else 0
    if step and stride >= size and start + L * stride <= flat.size:
        return flat[start:start + L * stride].reshape(L, stride)[:, :size]
    if step and stride > 0 and start + (L - 1) * stride + size <= flat.size:
        return np.lib.stride_tricks.as_strided(flat[start:], shape=(L, size),
                                               strides=(stride * step, step), writeable=False)
    return flat[start + np.arange(L)[:, None] * stride + np.arange(size)]


#: steps x body nodes from which a graph-API loop body is compiled (in the
#: background, at its second run): a Function is built to be called again,
#: so smaller loops than ``ta.scan``'s qualify (``tapead.compiler.eager``)
MIN_WORK = 512


def scan_in_c(prog, carry: np.ndarray, xs: np.ndarray, ys: np.ndarray, traj: np.ndarray,
              order: np.ndarray) -> None:
    """The steps ``order`` of a loop whose body is the recorded scalar program
    ``prog`` (inputs: the ``carry.size`` carries, then one row of ``xs``;
    outputs: the next carries, then one row of ``ys``), by ``_core.scalar_scan``
    (arguments as there; ``ValueError`` when the body is not all scalar).  A
    body run often enough is compiled to C in the background
    (``tapead.compiler.eager``) and runs compiled from then on, with the
    interpreter's bits."""
    with prog._lock:
        lib, address = _compiled(prog, len(order), nc=carry.size)
        _core.scalar_scan(prog.tape, prog.tape.inputs, prog._ids, _out_consts(prog), carry,
                          xs, ys, traj, order, address)
        del lib                                 # kept loaded while the steps ran


def _out_consts(prog) -> List[float]:
    return [0.0 if on_tape else float(ref) for on_tape, ref in prog._slots]


def _compiled(prog, steps: int, part: str = "scan", nc: int = 0, layout=None,
              condition: bool = False):
    """(library, address of its function ``part``, ``bodies.PARTS``) of
    ``prog``'s tape compiled as a loop body, once this process has compiled
    it; else (None, 0).

    By default its first ``nc`` inputs are the carries and the others read one
    column each, in order; ``layout`` = (carry input ids, step input ids, their
    columns, the row's length, parameter input ids) says otherwise (a body
    with parameters compiles only its ``step``, which reads them from the
    tape's value slots).  ``condition``: the tape is a while loop's condition,
    whose outputs (the two sides of its comparison) are not carries: its
    carries pass through unchanged (only its ``step`` is meant to run)."""
    tp = prog.tape
    found = prog.__dict__.setdefault("_native_bodies", {})
    quick = (nc, condition, tp.n_nodes) if layout is None else None
    state = found.get(quick)                   # the default layout: looked up by nc
    if state is None:
        state = _body_state(prog, tp, found, nc, layout, condition)
        if quick is not None:
            found[quick] = state
    if state[1] is None:
        state[1] = eager.compiled(state[0], steps, MIN_WORK, small=True)
        if state[1] is None:
            return None, 0
    lib, addresses, _ = state[1]
    if len(addresses) < len(PARTS) and part != "step":
        return None, 0                          # a body with parameters: its step only
    return lib, addresses[PARTS.index(part)]


def _body_state(prog, tp, found, nc, layout, condition) -> list:
    """[compiler spec, compiled body or None] of ``prog`` in ``layout``."""
    if layout is None:
        ins = [int(i) for i in tp.inputs]
        layout = (ins[:nc], ins[nc:], range(len(ins) - nc), len(ins) - nc, ())
    cin, xin, cols, row_len, params = (tuple(int(v) for v in part_) if k != 3 else int(part_)
                                       for k, part_ in enumerate(layout))
    key = (tp.n_nodes, cin, xin, cols, row_len, params, condition)
    state = found.get(key)
    if state is None:
        op, a, b = tp.export_nodes()
        outs, consts = [int(i) for i in prog._ids], _out_consts(prog)
        if condition:
            outs, consts = list(cin) + outs, [0.0] * len(cin) + consts
        spec = (op, a, b, tp.node_constants(), list(cin), list(xin), outs, consts, cols,
                row_len, params)
        state = found[key] = [spec, None]
    return state


_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def while_plan(spec) -> Any:
    """(scalarized body, scalarized sides of the condition, comparison) of a
    while loop whose values are float64, whose condition is one comparison of
    two float scalars and whose body ``scalarize`` rewrites; else None."""
    if "while_plan" not in spec._derived:
        plan = None
        test = spec.cond.simplified_outputs()[0]
        if not spec.index and test.op in _COMPARISONS and all(
                o.shape == () and o.dtype == np.float64 for o in test.operands) and all(
                t.dtype == np.float64 for t in spec.carry_types + spec.xs_types):
            sides = make_function(f"{spec.cond.name}_sides", spec.cond.inputs,
                                  [("lhs", test.operands[0]), ("rhs", test.operands[1])])
            body, cond = scalarize(spec.body), scalarize(sides)
            if body is not None and cond is not None:
                plan = (body, cond, test.op)
        spec._derived["while_plan"] = plan
    return spec._derived["while_plan"]


def run_while_steps(spec, carries, xs_flat, traj) -> Any:
    """Run a while loop in C (``_core.scalar_while``): (final carries, count),
    or None (nothing done) when it cannot run there."""
    plan = while_plan(spec)
    if plan is None:
        return None
    body, cond, comparison = plan
    carry = np.concatenate([np.ravel(c) for c in carries] + [np.zeros(0)]).astype(np.float64)
    params = np.concatenate([np.ravel(f) for f in xs_flat] + [np.zeros(0)]).astype(np.float64)
    start = list(carry) + list(params)
    bp, cp = program_of(body, start), program_of(cond, start)
    if bp is None or cp is None:
        return None
    keep = spec.n_carry > 0 and traj[0] is not None
    t = np.zeros((spec.length if keep else 0, carry.size), dtype=np.float64)
    with bp._lock, cp._lock:
        try:
            native = _while_steps(bp, cp, carry.size, spec.length)
            count = _core.scalar_while(bp.tape, bp.tape.inputs, bp._ids, _out_consts(bp),
                                       cp.tape, cp.tape.inputs, cp._ids, _out_consts(cp),
                                       comparison, carry, params, t, spec.length, *native[1:])
            del native                          # (its libraries kept loaded until here)
        except ValueError:
            spec._derived["while_plan"] = None          # not all scalar: step from Python
            return None
    out, col = [], 0
    for j, ct in enumerate(spec.carry_types):
        if keep:
            traj[j][:count] = t[:count, col:col + ct.size].reshape((count,) + ct.shape)
        value = carry[col:col + ct.size].reshape(ct.shape)
        out.append(float(value) if ct.shape == () else value)
        col += ct.size
    return out, count


def _while_steps(bp, cp, nc: int, steps: int):
    """(libraries, body step address, condition step address) of a while
    loop's compiled body and condition, both compiled (else 0, 0)."""
    blib, body = _compiled(bp, steps, "step", nc=nc)
    clib, cond = _compiled(cp, steps, "step", nc=nc, condition=True)
    if not (body and cond):
        return None, 0, 0
    return (blib, clib), body, cond


class _Sweep:
    """The two scalarized bodies of a checkpointed backward loop ``spec``
    (``spec.recompute``: its primal), recorded, and its per-step input rows:
    :meth:`run` reverses executed steps in C from a stored carry.

    ``flats``: the backward loop's per-step operands after the carries it
    reads (``spec.xs_types[primal.n_carry:]``) as flat arrays, the primal's
    own first; ``carry`` and ``seed``: values of the primal's carries and of
    their adjoint, and ``first``: a step, to record the bodies with.  An
    operand passed whole to every step (a ``while_loop``'s ``params``, a
    ``sc.broadcast``) is a parameter, written once.  ``ok`` is False when a
    body cannot run in C.
    """

    def __init__(self, spec, flats, carry, seed, first: int):
        primal = self.primal = spec.recompute
        self.spec, self.ok = spec, False
        fplan, bplan = scan_plan(primal), scan_plan(spec)
        if fplan is None or bplan is None:
            return
        L = primal.length
        sources: List[Any] = [None] if primal.index or spec.index else []  # None: step no.
        params: List[float] = []

        def place(flat, ttype, start, stride) -> List[int]:
            """The columns (or parameters, ``-1 - j``) of one operand's elements."""
            where = []
            for i in range(ttype.size):
                if stride == 0:                       # passed whole: a parameter
                    params.append(float(flat[start + i]))
                    where.append(-len(params))
                else:
                    sources.append(flat[start + i::stride][:L])
                    where.append(len(sources) - 1)
            return where

        n_px = len(primal.xs_types)
        types, windows = spec.xs_types[primal.n_carry:], spec.windows[primal.n_carry:]
        placed = [place(f, t, start, stride)
                  for f, t, (start, stride) in zip(flats, types, windows)]
        self.primal_cols = ([0] if primal.index else []) + [c for w in placed[:n_px] for c in w]
        self.back_cols = ([0] if spec.index else []) + [c for w in placed for c in w]
        xs = self.xs = np.empty((L, len(sources)), dtype=np.float64)     # one row per step
        for c, source in enumerate(sources):
            xs[:, c] = np.arange(L) if source is None else source
        self.params = np.asarray(params, dtype=np.float64)
        carry0, adjoint = _flat(carry), _flat(seed)
        self.nc, self.nb = nc, nb = carry0.size, adjoint.size

        def row_values(cols) -> List[float]:                # inputs of step ``first``
            return [float(xs[first, c]) if c >= 0 else float(self.params[-1 - c])
                    for c in cols]

        ni = 1 if spec.index else 0
        fprog = program_of(fplan, list(carry0) + row_values(self.primal_cols))
        bprog = program_of(bplan, list(adjoint) + row_values(self.back_cols[:ni])
                           + list(carry0) + row_values(self.back_cols[ni:]))
        if fprog is None or bprog is None:
            return
        self.progs = (fprog, bprog)
        fin, bin_ = list(fprog.tape.inputs), list(bprog.tape.inputs)
        self.fwd = (fprog.tape, fin[:nc], fin[nc:], self.primal_cols, fprog._ids,
                    [0.0 if on_tape else float(ref) for on_tape, ref in fprog._slots])
        self.back = (bprog.tape, bin_[:nb] + bin_[nb + ni:nb + ni + nc],
                     bin_[nb:nb + ni] + bin_[nb + ni + nc:], self.back_cols, bprog._ids,
                     [0.0 if on_tape else float(ref) for on_tape, ref in bprog._slots])
        self.y = np.zeros((L, sum(t.size for t in spec.y_types)), dtype=np.float64)
        self.layouts = [_sweep_layout(body[1], body[2], body[3], xs.shape[1])
                        for body in (self.fwd, self.back)]
        self.ok = True

    def run(self, carry0: np.ndarray, adjoint: np.ndarray, order: np.ndarray, s: int) -> Any:
        """Reverse the steps ``order`` (execution order) from ``carry0``, the
        carries entering the first, with at most ``s`` stored carries:
        ``adjoint`` (of the carries after the last step) is overwritten with
        that of ``carry0``; the steps' outputs go to rows of ``self.y``.
        Returns the primal steps recomputed, or None (not all scalar)."""
        fprog, bprog = self.progs
        with fprog._lock, bprog._lock:
            try:
                flib, fstep = _compiled(fprog, len(order), "step", layout=self.layouts[0])
                blib, bstep = _compiled(bprog, len(order), "step", layout=self.layouts[1])
                if not (fstep and bstep):
                    fstep = bstep = 0
                return int(_core.scalar_scan_checkpointed(
                    *self.fwd, *self.back, self.xs, self.params, carry0, adjoint, self.y,
                    order, s, fstep, bstep))
            except ValueError:
                self.spec._derived["scalar_plan"] = None   # not all scalar: from Python
                return None

    def outputs(self, adjoint: np.ndarray, ys) -> List[Any]:
        """Fill ``ys`` (the backward loop's stacked outputs) from ``self.y``;
        the adjoint as one value per carry."""
        col, L = 0, self.primal.length         # rows of steps not run stay zero
        for j, yt in enumerate(self.spec.y_types):
            ys[j][...] = self.y[:, col:col + yt.size].reshape((L,) + yt.shape)
            col += yt.size
        return _split(adjoint, self.spec.carry_types)


def _sweep_layout(carry_in, x_in, x_cols, row_len: int) -> tuple:
    """A checkpointed loop body's inputs as ``_compiled``'s layout: the step
    inputs reading a column, and the parameters (negative columns)."""
    per_step = [j for j, c in enumerate(x_cols) if c >= 0]
    return (carry_in, [x_in[j] for j in per_step], [x_cols[j] for j in per_step], row_len,
            [x_in[j] for j, c in enumerate(x_cols) if c < 0])


def _flat(values) -> np.ndarray:
    if len(values) == 1:
        return np.array(values[0], dtype=np.float64).reshape(-1)
    return np.concatenate([np.ravel(v) for v in values] + [np.zeros(0)]).astype(np.float64)


def _split(flat: np.ndarray, types) -> List[Any]:
    out, col = [], 0
    for t in types:
        value = flat[col:col + t.size].reshape(t.shape)
        out.append(float(value) if t.shape == () else value)
        col += t.size
    return out


def run_checkpointed_steps(spec, init, trip: int, flats, seed, ys) -> Optional[List[Any]]:
    """The backward loop ``spec`` of a checkpointed scan (``spec.recompute``
    its primal) run in C: the adjoint of the primal's initial carries (one
    value per carry), ``ys`` (the backward loop's stacked outputs) filled;
    or None (nothing done) when either body cannot run there.

    ``init``: the primal's initial carries; ``trip``: the steps it executes;
    ``flats``, ``seed``: as for ``_Sweep``.  The primal steps recomputed are
    recorded in ``spec._derived["sweep"]`` with revolve's prediction, for
    tests and benchmarks.
    """
    if trip == 0:
        return None
    order = np.arange(trip, dtype=np.intp)
    if spec.recompute.reverse:
        order = order[::-1].copy()
    sweep = _Sweep(spec, flats, init, seed, int(order[0]))
    if not sweep.ok:
        return None
    s = min(max(1, spec.checkpoints), trip)
    adjoint = _flat(seed)
    advances = sweep.run(_flat(init), adjoint, order, s)
    if advances is None:
        return None
    spec._derived["sweep"] = {"forward_steps": advances, "backward_steps": trip,
                              "snapshots": s, "carry_bytes": 8 * sweep.nc,
                              "predicted_forward_steps": optimal_forward_steps(trip, s)}
    return sweep.outputs(adjoint, ys)


def run_while_online_steps(spec, carries, xs_flat) -> Any:
    """A checkpointed while loop run forward in C (``_core.scalar_while_online``):
    (final carries, count, stored carries: step index -> one value per carry,
    at most ``spec.checkpoints`` of them, placed by the online rule of
    ``tapead.online.OnlineChain``), or None when it cannot run there."""
    plan = while_plan(spec)
    if plan is None or spec.length == 0:
        return None
    body, cond, comparison = plan
    carry, params = _flat(carries), _flat(xs_flat)
    start = list(carry) + list(params)
    bp, cp = program_of(body, start), program_of(cond, start)
    if bp is None or cp is None:
        return None
    with bp._lock, cp._lock:
        try:
            native = _while_steps(bp, cp, carry.size, spec.length)
            count, steps, stored = _core.scalar_while_online(
                bp.tape, bp.tape.inputs, bp._ids, _out_consts(bp), cp.tape, cp.tape.inputs,
                cp._ids, _out_consts(cp), comparison, carry, params, spec.length,
                spec.checkpoints, *native[1:])
            del native
        except ValueError:
            spec._derived["while_plan"] = None          # not all scalar: step from Python
            return None
    states = {int(k): _split(row, spec.carry_types) for k, row in zip(steps, stored)}
    return _split(carry, spec.carry_types), int(count), states


def run_online_reverse_steps(spec, stored, n: int, flats, seed, ys) -> Optional[List[Any]]:
    """The backward loop ``spec`` of a checkpointed while loop run in C from
    the carries its forward run stored (``stored``: step index -> carries,
    placed by the online rule): the segments between stored carries
    reversed last first, each under revolve with the slots the earlier
    stored carries leave free (as ``tapead.online.OnlineChain.reverse``).
    The adjoint of the initial carries, or None when a body cannot run in C.
    ``spec._derived["sweep"]`` records the steps run, the forward run's
    included, against ``tapead.online.online_forward_steps``."""
    if n == 0:
        return None
    s = max(1, spec.checkpoints)
    starts = [int(k) for k in _revolve.online_segments(n, s)]
    if sorted(stored) != starts:
        return None                     # not the online rule's carries
    sweep = _Sweep(spec, flats, stored[0], seed, 0)
    if not sweep.ok:
        return None
    adjoint, total = _flat(seed), n
    bounds = starts + [n]
    for j in range(len(starts) - 1, -1, -1):
        start, L = bounds[j], bounds[j + 1] - bounds[j]
        advances = sweep.run(_flat(stored[start]), adjoint,
                             np.arange(start, start + L, dtype=np.intp), min(s - j, L))
        if advances is None:
            return None
        total += advances
    spec._derived["sweep"] = {"forward_steps": total, "backward_steps": n,
                              "snapshots": len(starts), "carry_bytes": 8 * sweep.nc,
                              "predicted_forward_steps": online_forward_steps(n, s)}
    return sweep.outputs(adjoint, ys)
