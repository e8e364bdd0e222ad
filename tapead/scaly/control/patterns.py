"""Sparsity patterns of scan outputs, propagated step by step.

A scan's output depends on the elements its steps read: the pattern of the
carries after step k is the body's pattern applied to the carries' and the
step inputs' patterns before it, and so on through the steps in execution
order.  Stacked outputs and trajectories stack the per-step patterns; with a
run-time ``trip`` the final carries may be those after any number of steps,
so their pattern is the union over all of them.

Used by the sparsity rule of loop outputs on the tape
(``tapead.scaly.control.lowering``); a scan for which this is not exact enough to
be safe or cheap (a reverse scan with a trip, whose entering carries depend
on the trip; a checkpointed backward loop; more than ``MAX_STEPS`` steps)
keeps the dense superset there.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import scipy.sparse as sp
from tapead.scaly.sparsity import _pattern

#: longer scans keep the dense superset pattern
MAX_STEPS = 1000


def supported(spec) -> bool:
    """Whether ``scan_patterns`` handles this loop."""
    return (spec.op == "scan" and spec.recompute is None and spec.length <= MAX_STEPS
            and not (spec.reverse and spec.has_trip))


def _body_patterns(spec) -> list:
    """Per body output, per body input: the body's pattern (float CSR) or None."""
    cached = spec._derived.get("body_patterns")
    if cached is None:
        fn = spec.body
        outs, ins = fn.expanded_outputs(), fn.inputs
        cached = [[None if y.dtype != np.float64 or x.dtype != np.float64 else
                   sp.csr_array(_pattern(y, x).to_scipy(), dtype=float) for x in ins]
                  for y in outs]
        spec._derived["body_patterns"] = cached
    return cached


def _empty(rows: int, N: int) -> sp.csr_array:
    return sp.csr_array((rows, N))


def scan_patterns(spec, operand_pats: list, N: int) -> List[sp.csr_array]:
    """The pattern (rows: output elements, columns: the tape's N input
    elements) of every output of a scan, given its operands' patterns (None
    for a constant operand)."""
    key = tuple(id(p) for p in operand_pats) + (N,)
    cached = spec._derived.get("pattern_cache")
    if cached is not None and cached[0] == key:    # (it keeps the operands alive, so
        return cached[2]                            # their ids are not reused)
    nc, L = spec.n_carry, spec.length
    pos = nc + (1 if spec.has_trip else 0)
    carry: List[Optional[sp.csr_array]] = [
        sp.csr_array(p) if p is not None else _empty(t.size, N)
        for p, t in zip(operand_pats[:nc], spec.carry_types)]
    xs = [None if p is None else sp.csr_array(p) for p in operand_pats[pos:]]
    B = _body_patterns(spec)
    body_outs = [t.size for t in spec.carry_types] + [t.size for t in spec.y_types]
    union = list(carry) if spec.has_trip else None
    ys = [[_empty(t.size, N)] * L for t in spec.y_types]
    traj = [[_empty(t.size, N)] * L for t in spec.carry_types]
    for k in (range(L - 1, -1, -1) if spec.reverse else range(L)):
        step = []
        for X, t, (start, stride) in zip(xs, spec.xs_types, spec.windows):
            rows = start + k * stride + np.arange(t.size)
            step.append(None if X is None else X[rows])
        inputs = carry + ([None] if spec.index else []) + step
        new = []
        for o, size in enumerate(body_outs):
            P = _empty(size, N)
            for Bi, Pi in zip(B[o], inputs):
                if Bi is not None and Pi is not None:
                    P = P + Bi @ Pi
            new.append(P)
        for j in range(nc):
            traj[j][k] = carry[j]
        for j in range(len(ys)):
            ys[j][k] = new[nc + j]
        carry = new[:nc]
        if union is not None:
            union = [u + c for u, c in zip(union, carry)]
    finals = union if union is not None else carry
    stacked = [sp.csr_array(sp.vstack(rows)) if L else _empty(0, N) for rows in ys]
    trajectories = [sp.csr_array(sp.vstack(rows)) if L else _empty(0, N) for rows in traj]
    result = list(finals) + stacked + trajectories
    spec._derived["pattern_cache"] = (key, list(operand_pats), result)
    return result
