"""The graph API's loops whose bodies run in C.

A loop body (a Function) whose values are float64 and whose graph
``tapead.scaly.scalarize`` rewrites as scalar operations is recorded once on
an all-scalar tape; the loop's steps then replay that tape in C, with no
Python per step (``_core``'s one scalar-body replay, ``_tape_loop.pxi``):

* ``run_scan_steps``: the steps of a scan (``_core.scalar_scan``);
* ``run_while_steps``: a while loop whose condition is one comparison of two
  float scalars (``_core.scalar_while``);
* ``run_checkpointed_steps``: the backward loop of ``sc.scan(...,
  checkpoints=s)``, the primal steps recomputed from at most ``s`` stored
  carries under revolve and each executed step reversed by the backward
  body (``_core.scalar_scan_checkpointed``).

Each returns None (nothing done) when its loop cannot run there; the caller
(``tapead.scaly.loops_lower``) then steps the body from Python.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from tapead import _core
from tapead.checkpointing import optimal_forward_steps
from tapead.scaly.control_spec import make_function
from tapead.scaly.scalarize import scalarize

__all__ = ["program_of", "scan_plan", "run_scan_steps", "while_plan", "run_while_steps",
           "run_checkpointed_steps"]


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
    carry = np.concatenate([np.ravel(c) for c in carries] + [np.zeros(0)]).astype(np.float64)
    rows = np.arange(L, dtype=np.int64)
    columns = [rows.astype(np.float64)] if spec.index else []     # the step number
    for flat, t, (start, stride) in zip(xs_flat, spec.xs_types, spec.windows):
        for i in range(t.size):
            columns.append(flat[start + i + rows * stride] if L else np.zeros(0))
    xs = (np.stack(columns, axis=1) if columns else np.zeros((L, 0))).astype(np.float64)
    order = np.asarray(steps, dtype=np.intp)
    prog = program_of(fn, list(carry) + list(xs[order[0]]))    # recorded at step one
    if prog is None:
        return None
    ny = sum(t.size for t in spec.y_types)
    y = np.zeros((L, ny), dtype=np.float64)
    keep = spec.n_carry > 0 and traj[0] is not None
    t = np.zeros((L if keep else 0, carry.size), dtype=np.float64)
    consts = [0.0 if on_tape else float(ref) for on_tape, ref in prog._slots]
    with prog._lock:
        try:
            _core.scalar_scan(prog.tape, prog.tape.inputs, prog._ids, consts, carry,
                              np.ascontiguousarray(xs), y, t, order)
        except ValueError:
            spec._derived["scalar_plan"] = None        # not all scalar: step from Python
            return None
    col = 0
    for j, yt in enumerate(spec.y_types):
        ys[j][order] = y[order, col:col + yt.size].reshape((len(order),) + yt.shape)
        col += yt.size
    out, col = [], 0
    for j, ct in enumerate(spec.carry_types):
        if keep:
            traj[j][order] = t[order, col:col + ct.size].reshape((len(order),) + ct.shape)
        value = carry[col:col + ct.size].reshape(ct.shape)
        out.append(float(value) if ct.shape == () else value)
        col += ct.size
    return out


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
    consts = [[0.0 if on_tape else float(ref) for on_tape, ref in p._slots] for p in (bp, cp)]
    with bp._lock, cp._lock:
        try:
            count = _core.scalar_while(bp.tape, bp.tape.inputs, bp._ids, consts[0], cp.tape,
                                       cp.tape.inputs, cp._ids, consts[1], comparison,
                                       carry, params, t, spec.length)
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


def run_checkpointed_steps(spec, init, trip: int, flats, seed, ys) -> Optional[List[Any]]:
    """The backward loop ``spec`` of a checkpointed scan (``spec.recompute``
    its primal) run in C: the adjoint of the primal's initial carries (one
    value per carry), ``ys`` (the backward loop's stacked outputs) filled;
    or None (nothing done) when either body cannot run there.

    ``init``: the primal's initial carries; ``trip``: the steps it executes;
    ``flats``: the backward loop's per-step operands after the carries it
    reads (``spec.xs_types[primal.n_carry:]``) as flat arrays, the primal's
    own first; ``seed``: the adjoint of the final carries.  The primal steps
    recomputed are recorded in ``spec._derived["sweep"]`` (with the
    schedule's prediction) for tests and benchmarks.
    """
    primal = spec.recompute
    fplan, bplan = scan_plan(primal), scan_plan(spec)
    if fplan is None or bplan is None or trip == 0:
        return None
    L = primal.length
    indexed = primal.index or spec.index
    sources: List[Any] = [None] if indexed else []  # None: the step number (column 0)
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
    placed = [place(f, t, start, stride) for f, t, (start, stride) in zip(flats, types, windows)]
    primal_cols = ([0] if primal.index else []) + [c for w in placed[:n_px] for c in w]
    back_cols = ([0] if spec.index else []) + [c for w in placed for c in w]
    xs = np.empty((L, len(sources)), dtype=np.float64)       # one row per step
    for c, source in enumerate(sources):
        xs[:, c] = np.arange(L) if source is None else source
    carry0 = np.concatenate([np.ravel(c) for c in init] + [np.zeros(0)]).astype(np.float64)
    adjoint = np.concatenate([np.ravel(g) for g in seed] + [np.zeros(0)]).astype(np.float64)
    nc, nb = carry0.size, adjoint.size
    order = np.arange(trip, dtype=np.intp)
    if primal.reverse:
        order = order[::-1].copy()

    def row_values(cols) -> List[float]:                # inputs of the first step
        par = np.asarray(params, dtype=np.float64)
        return [float(xs[order[0], c]) if c >= 0 else float(par[-1 - c]) for c in cols]

    fprog = program_of(fplan, list(carry0) + row_values(primal_cols))
    bprog = program_of(bplan, list(adjoint) + (row_values([0]) if spec.index else [])
                       + list(carry0) + row_values(back_cols[1 if spec.index else 0:]))
    if fprog is None or bprog is None:
        return None
    fin, bin_ = list(fprog.tape.inputs), list(bprog.tape.inputs)
    ni = 1 if spec.index else 0
    back_carry_in = bin_[:nb] + bin_[nb + ni:nb + ni + nc]
    back_x_in = bin_[nb:nb + ni] + bin_[nb + ni + nc:]
    ny = sum(t.size for t in spec.y_types)
    y = np.zeros((L, ny), dtype=np.float64)
    consts = [[0.0 if on_tape else float(ref) for on_tape, ref in p._slots]
              for p in (fprog, bprog)]
    s = max(1, spec.checkpoints)
    with fprog._lock, bprog._lock:
        try:
            advances = _core.scalar_scan_checkpointed(
                fprog.tape, fin[:nc], fin[nc:], primal_cols, fprog._ids, consts[0],
                bprog.tape, back_carry_in, back_x_in, back_cols, bprog._ids, consts[1],
                xs, np.asarray(params, dtype=np.float64), carry0,
                adjoint, y, order, s)
        except ValueError:
            spec._derived["scalar_plan"] = None           # not all scalar: step from Python
            return None
    spec._derived["sweep"] = {"forward_steps": int(advances), "backward_steps": trip,
                              "snapshots": min(s, trip), "carry_bytes": 8 * nc,
                              "predicted_forward_steps": optimal_forward_steps(trip,
                                                                               min(s, trip))}
    col = 0                         # rows of steps not run stay zero, as in ys
    for j, yt in enumerate(spec.y_types):
        ys[j][...] = y[:, col:col + yt.size].reshape((L,) + yt.shape)
        col += yt.size
    out, col = [], 0
    for ct in spec.carry_types:
        value = adjoint[col:col + ct.size].reshape(ct.shape)
        out.append(float(value) if ct.shape == () else value)
        col += ct.size
    return out
