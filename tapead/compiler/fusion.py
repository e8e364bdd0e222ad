"""Fusion of elementwise array nodes: the plan a values-only replay follows.

A recorded program (``ta.jit``'s tape, the derivative computation included)
is full of chains of elementwise numpy calls -- ``sin(x[:-1]) * x[1:]``,
``g * (1 - h ** 2)`` -- each of which, replayed node by node, reads and writes
whole arrays.  :func:`plan` finds the chains: maximal groups of elementwise
primitives whose implementation is a numpy ufunc with a float64 loop, on
operands of one shape (or float scalars), and makes each a
``_core.FusedGroup``: one pass over blocks of the operands in which every
operation runs numpy's own float64 loop, so the values are numpy's bits and
the intermediates only the next operation reads never exist as whole arrays.
Only the members read outside the group are written out.

A group runs at its last node, so it never extends past a node outside it
that reads one of its members (that reader needs the member's value before
the group would run); a group of one node is left to the replay.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from tapead import _core

__all__ = ["plan", "FusionPlan"]

_OBJ, _GUARD = 1, 2     # OP_OBJ, OP_GUARD (tools/opcodes.txt)
_SLOT_TEMP, _SLOT_ARRAY, _SLOT_SCALAR, _SLOT_OUTPUT, _SLOT_REDUCE = 0, 1, 2, 3, 4


class FusionPlan:
    """The fused groups of one tape (``groups``: ``_core.FusedGroup``), and what
    each covers, for ``repr`` and tests."""

    def __init__(self, groups: List["_core.FusedGroup"], dead: List[int] = ()):
        self.groups = groups
        self.dead = list(dead)          # object nodes no output or guard needs: skipped

    def install(self, tape) -> None:
        """Make ``tape``'s values-only replays follow this plan."""
        tape.set_fusion(self.groups, self.dead)

    @property
    def n_fused_nodes(self) -> int:
        return sum(len(g.members) for g in self.groups)

    def describe(self, tape) -> str:
        """One line per group: its shape, operations and written-out nodes."""
        lines = []
        for g in self.groups:
            names = " -> ".join(tape.record(i).prim.name for i in g.members)
            lines.append(f"group {g.shape} nodes {g.members[0]}..{g.members[-1]}: {names}; "
                         f"writes {g.outputs}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<FusionPlan: {len(self.groups)} groups, {self.n_fused_nodes} nodes, "
                f"{len(self.dead)} dead>")


def _lowering(prim):
    """(ufunc, argument positions) a fused replay computes ``prim`` with, or None."""
    fa = getattr(prim, "fused_as", None)
    if fa is not None:
        return fa
    u = prim.impl
    return (u, None) if isinstance(u, np.ufunc) else None


def _operand(tape, rec, k, shape):
    """How argument k of a candidate enters a group: ('node', id), ('const',
    value) or None (it cannot)."""
    pid = rec.parents[k]
    if pid >= 0:
        if tape.is_scalar_node(pid):
            return ("node", pid)
        v = tape.value(pid)
        if isinstance(v, float):
            return ("node", pid)
        if type(v) is np.ndarray and v.dtype == np.float64 and v.shape == shape and (
                v.ndim == 1 or v.flags.c_contiguous):
            return ("node", pid)
        return None
    c = rec.consts[k]
    if type(c) in (float, int) and not isinstance(c, bool):
        return ("const", float(c))
    if isinstance(c, np.ndarray) and c.ndim == 0 and c.dtype == np.float64:
        return ("const", float(c))
    return None


def _candidate(tape, i):
    """The shape of node i when it may join a group (an elementwise primitive
    computed by a numpy ufunc's float64 loop, no parameters, float64 array out),
    else None."""
    rec = tape.record(i)
    prim = rec.prim
    if prim is None or not getattr(prim, "elementwise", False) or rec.params:
        return None
    low = _lowering(prim)
    if low is None:
        return None
    u, args = low
    args = range(len(rec.parents)) if args is None else args
    if not _core.ufunc_has_float64_loop(u, len(args)):
        return None
    ans = rec.ans
    if type(ans) is not np.ndarray or ans.dtype != np.float64 or ans.ndim == 0:
        return None
    for k in args:
        if _operand(tape, rec, k, ans.shape) is None:
            return None
    return ans.shape


def _args(rec):
    low = _lowering(rec.prim)
    return low[0], (range(len(rec.parents)) if low[1] is None else low[1])


def _summand(tape, i, rec, group_of, groups, lowerable):
    """The group a full sum (node i) may end in as a reduction, or None: the
    sum of all of a 1-d group member's elements (numpy's pairwise order, which a
    native kernel reproduces)."""
    if rec.prim is None or rec.prim.name != "sum" or len(rec.parents) != 1:
        return None
    if rec.params.get("axis") is not None or rec.params.get("keepdims") or \
            set(rec.params) - {"axis", "keepdims"}:
        return None
    p = rec.parents[0]
    g = group_of.get(p)
    if g is None or not groups[g]["open"] or len(groups[g]["shape"]) != 1:
        return None
    if not all(u in lowerable for u in groups[g]["ufuncs"]):
        return None
    if not isinstance(rec.ans, float):       # (a replay keeps a 0-d float64 as a float)
        return None
    return g


def _joinable(groups, inner, shape, u, lowerable) -> bool:
    """Whether a candidate computing ``u`` may join (and merge) the groups ``inner``:
    all open, of its shape, and -- where one of them holds a sum, so it runs
    natively -- every operation of the merged group natively computable."""
    gs = [groups[k] for k in inner]
    if not all(g["open"] and g["shape"] == shape for g in gs):
        return False
    if any(g["native"] for g in gs):
        return u in lowerable and all(v in lowerable for g in gs for v in g["ufuncs"])
    return True


def plan(tape, outputs: Sequence[int] = (), reductions=()) -> FusionPlan:
    """The fused groups of ``tape``'s elementwise chains.

    Parameters
    ----------
    tape : Tape
        A recorded tape (not recording any more).
    outputs : sequence of int
        Nodes the caller reads after a replay: written out.
    reductions : collection of ufuncs
        The ufuncs native kernels compute (:mod:`tapead.compiler.native`):
        a group of only these also takes in full sums of its members
        (``sum(x)`` of a 1-d member), and then only these.  Such groups run
        through native kernels only, which sum in numpy's order.  Empty (the
        default): no sums in groups.

    Returns
    -------
    FusionPlan
        Install it with ``plan.install(tape)``.
    """
    n = tape.n_nodes
    op = tape.export_nodes()[0]
    dead = _dead_nodes(tape, op, outputs)
    group_of: Dict[int, int] = {}          # node -> index into groups
    groups: List[dict] = []                # members, shape, open
    lowered: Dict[int, tuple] = {}         # a candidate's reads when it is fused
    sums = set()                           # reductions ending in a group
    for i in range(n):
        if i in dead:
            continue
        full = tape.reads(i)
        if reductions and op[i] == _OBJ:
            rec = tape.record(i)
            g = _summand(tape, i, rec, group_of, groups, reductions)
            if g is not None:
                groups[g]["members"].append(i)
                group_of[i] = g
                lowered[i] = (rec.parents[0],)
                sums.add(i)
                groups[g]["native"] = True
                continue
        shape = _candidate(tape, i) if op[i] == _OBJ else None
        if shape is not None:              # a fused member reads its lowered arguments only
            rec = tape.record(i)
            used = _args(rec)[1]
            lowered[i] = tuple(rec.parents[k] for k in used if rec.parents[k] >= 0)
            # a hint operand the lowering ignores (cos_given_sin's sin) still
            # draws the node into its group: the sine and cosine of one argument
            # in one loop are one sincos in native code
            hints = [p for k, p in enumerate(rec.parents) if k not in used and p >= 0]
            inner = sorted({group_of[r] for r in list(lowered[i]) + hints if r in group_of})
            if inner and not any(r in sums for r in lowered[i]) and \
                    _joinable(groups, inner, shape, _args(rec)[0], reductions):
                # (a group's sum is known only once its loop ends: a reader runs after)
                g = groups[inner[0]]
                for k in inner[1:]:        # open groups both read here: one loop for all
                    other = groups[k]
                    for m in other["members"]:
                        group_of[m] = inner[0]
                    g["members"] = sorted(g["members"] + other["members"])
                    g["ufuncs"] += other["ufuncs"]
                    g["native"] = g["native"] or other["native"]
                    other["members"], other["ufuncs"] = [], []
                g["members"].append(i)
                g["ufuncs"].append(_args(rec)[0])
                group_of[i] = inner[0]
                continue
        for r in full:                     # read from outside: it cannot grow past here
            if r in group_of:
                groups[group_of[r]]["open"] = False
        if shape is not None:
            group_of[i] = len(groups)
            groups.append({"members": [i], "shape": shape, "open": True,
                           "ufuncs": [_args(tape.record(i))[0]], "native": False})
    groups = [g for g in groups if len(g["members"]) >= 2]
    fused = {i for g in groups for i in g["members"]}
    readers: Dict[int, List[int]] = {}
    for i in range(n):
        if i in dead:
            continue
        for r in (lowered[i] if i in fused else tape.reads(i)):
            readers.setdefault(r, []).append(i)
    wanted = set(outputs)
    made = []
    for g in groups:
        members = g["members"]
        inside = set(members)
        slots, slot_of, ops = [], {}, []
        for i in members:                  # the members' own slots, in order
            out = i in wanted or any(r not in inside for r in readers.get(i, ()))
            slot_of[i] = len(slots)
            kind = _SLOT_REDUCE if i in sums else _SLOT_OUTPUT if out else _SLOT_TEMP
            slots.append((kind, i, 0.0))
        for i in members:
            if i in sums:
                ops.append((None, [slot_of[tape.record(i).parents[0]]], slot_of[i]))
                continue
            rec = tape.record(i)
            ufunc, args = _args(rec)
            ins = []
            for k in args:
                kind, what = _operand(tape, rec, k, g["shape"])
                if kind == "node" and what in slot_of:
                    ins.append(slot_of[what])
                    continue
                key = (kind, what)
                if key not in slot_of:
                    slot_of[key] = len(slots)
                    if kind == "const":
                        slots.append((_SLOT_SCALAR, -1, what))
                    elif tape.is_scalar_node(what) or isinstance(tape.value(what), float):
                        slots.append((_SLOT_SCALAR, what, 0.0))
                    else:
                        slots.append((_SLOT_ARRAY, what, 0.0))
                ins.append(slot_of[key])
            ops.append((ufunc, ins, slot_of[i]))
        made.append(_core.FusedGroup(g["shape"], slots, ops, members))
    return FusionPlan(made, sorted(dead))


def _dead_nodes(tape, op, outputs):
    """The object nodes (with a primitive) that no output and no guard depends
    on, nor a node whose primitive runs in every replay (``replay_always``)."""
    n = len(op)
    live = bytearray(n)
    stack = [i for i in outputs if 0 <= i < n] + [i for i in range(n) if op[i] == _GUARD]
    stack += [i for i in range(n) if op[i] == _OBJ and
              getattr(tape.record(i).prim, "replay_always", False)]
    for i in stack:
        live[i] = 1
    while stack:                           # iterative: no recursion over the graph
        i = stack.pop()
        for r in tape.reads(i):
            if not live[r]:
                live[r] = 1
                stack.append(r)
    return {i for i in range(n) if not live[i] and op[i] == _OBJ
            and tape.record(i).prim is not None}
