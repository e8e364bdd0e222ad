"""Native code for a recording's long runs of scalar nodes: loops rerolled.

A Python loop over floats (``for i in range(n): s = s + sin(x[i]) * x[i+1]``,
RK4 on two floats) records the same few scalar nodes once per iteration, and
its gradient's recorded reverse sweep does the same backwards: a run of
100 000 scalar nodes that a replay walks one opcode at a time.  This module
finds where such a run repeats itself -- a block of ``P`` nodes whose
opcodes and constants are the same in each of ``K`` periods and whose
operands move by a fixed stride per period -- and turns the block into one C
loop over the periods with the period's nodes as straight-line code (values
of the same period in locals, every value also stored in the tape's value
array for the nodes after it).  The rest of the run stays on the
interpreter.  Each node's value is the C of ``tapead.compiler.scalar_c.RULES``,
the interpreter's operations, so the bits are the interpreter's.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from tapead.compiler import native
from tapead.compiler.scalar_c import PRELUDE, _BY_CODE, _FIRST_CONST, _literal, _sub

__all__ = ["plan_runs", "lower_runs", "compile_runs", "MIN_RUN"]

MIN_RUN = 2048          # scalar runs shorter than this stay on the interpreter
MIN_PERIODS = 8         # a repeated block must repeat at least this often
MAX_PERIOD = 4096       # nodes per period at most (the straight-line code of one)
_FIRST_BINARY = 10


class Block:
    """``K`` periods of ``P`` scalar nodes from node ``start`` on, inside the run
    that begins at ``run_start``: node ``start + k P + j`` is opcode ``op[j]``
    with operands ``a0[j] + k da[j]`` (and ``b``), constant ``c[j]``."""

    def __init__(self, run_start, start, P, K, op, a0, da, b0, db, c):
        self.run_start, self.start, self.P, self.K = run_start, start, P, K
        self.op, self.a0, self.da, self.b0, self.db, self.c = op, a0, da, b0, db, c

    @property
    def stop(self) -> int:
        return self.start + self.P * self.K

    def key(self) -> str:
        return self.source("@NAME@")

    def _ref(self, base0, delta, j) -> str:
        """An operand: a local of this period, or the value array."""
        here = base0 - self.start
        if delta == self.P and 0 <= here < j:
            return f"v{here}"
        return f"val[{base0} + k * {delta}]" if delta else f"val[{base0}]"

    def source(self, name: str) -> str:
        lines = []
        for j in range(self.P):
            o = int(self.op[j])
            _, value, _, _ = _BY_CODE[o]
            x = self._ref(int(self.a0[j]), int(self.da[j]), j)
            y = (self._ref(int(self.b0[j]), int(self.db[j]), j) if o < _FIRST_CONST
                 else _literal(float(self.c[j])))
            lines.append(f"const double v{j} = {_sub(value, x=x, y=y, v='', d0='')}; "
                         f"w[{j}] = v{j};")
        body = "\n    ".join(lines)
        return f"""
/* {self.K} periods of {self.P} scalar nodes */
void {name}(double *val) {{
  for (npy_intp k = 0; k < {self.K}; k++) {{
    double *w = val + {self.start} + k * {self.P};
    {body}
  }}
}}
"""


def _runs(op: np.ndarray) -> List[Tuple[int, int]]:
    """The maximal runs of scalar nodes, (start, stop), of at least MIN_RUN."""
    scalar = np.concatenate([[False], op >= _FIRST_BINARY, [False]])
    edges = np.flatnonzero(np.diff(scalar.astype(np.int8)))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2]) if e - s >= MIN_RUN]


def _block_at(op, a, b, c, anchor, stop, P) -> Optional[Tuple[int, tuple]]:
    """How many periods of ``P`` from ``anchor`` repeat (opcodes, constants
    and operand strides), and the block's arrays; None when fewer than
    MIN_PERIODS."""
    K = (stop - anchor) // P
    if K < MIN_PERIODS:
        return None
    sl = slice(anchor, anchor + K * P)
    ob, ab, bb, cb = (v[sl].reshape(K, P) for v in (op, a, b, c))
    good = (ob == ob[0]).all(axis=1) & (cb == cb[0]).all(axis=1)
    da, db = ab[1] - ab[0], bb[1] - bb[0]
    ks = np.arange(K)[:, None]
    good &= (ab == ab[0] + ks * da).all(axis=1)
    binary = ob[0] < _FIRST_CONST
    good &= ((bb == bb[0] + ks * db) | ~binary).all(axis=1)
    bad = np.flatnonzero(~good)
    K = int(bad[0]) if bad.size else K
    if K < MIN_PERIODS:
        return None
    if not all(int(o) in _BY_CODE for o in ob[0]):
        return None
    return K, (ob[0].copy(), ab[0].copy(), da.copy(), bb[0].copy(),
               np.where(binary, db, 0), cb[0].copy())


def _find_block(op, a, b, c, ops, rs, lo, re) -> Optional[Block]:
    """A repeated block inside nodes lo..re-1 of the run from ``rs``, or None."""
    for anchor in (lo, lo + (re - lo) // 4, lo + (re - lo) // 2):
        window = ops[anchor:anchor + 32]
        nxt = ops.find(window, anchor + 1, re)
        if nxt < 0 or nxt - anchor > MAX_PERIOD:
            continue
        P = nxt - anchor
        # the block may begin before the anchor: back up period by period
        # (its first period may differ in its operands: then one later)
        back = anchor
        while back - P >= lo and ops[back - P:back] == ops[back:back + P]:
            back -= P
        for start in (back, back + P, anchor, anchor + P):
            found = _block_at(op, a, b, c, start, re, P)
            if found is not None:
                K, arrays = found
                return Block(rs, start, P, K, *arrays)
    return None


def plan_runs(tape) -> List[Block]:
    """The repeated blocks of ``tape``'s long scalar runs, in order."""
    op, a, b = tape.export_nodes()
    c = tape.node_constants()
    ops = op.astype(np.int8).tobytes()
    blocks = []
    for rs, re in _runs(op):
        pos = rs
        while re - pos >= MIN_RUN:
            blk = _find_block(op, a, b, c, ops, rs, pos, re)
            if blk is None:
                break
            blocks.append(blk)
            pos = blk.stop
    return blocks


def lower_runs(blocks) -> str:
    """The C source of ``blocks`` (function ``tapead_run_k`` for block k)."""
    return PRELUDE + "".join(blk.source(f"tapead_run_{k}") for k, blk in enumerate(blocks))


def compile_runs(tape, lock=None) -> Optional[native.NativeLibrary]:
    """Plan, compile and install (``Tape.set_native_runs``) the repeated
    blocks of ``tape``'s long scalar runs; returns the library or None."""
    if not native.available():
        return None
    blocks = plan_runs(tape)
    if not blocks:
        return None
    texts, which = {}, []
    for blk in blocks:
        which.append(texts.setdefault(blk.key(), len(texts)))
    source = PRELUDE + "".join(t.replace("@NAME@", f"tapead_run_{k}")
                               for t, k in texts.items())
    path, seconds, cached = native._build(source, "runs", native._flags())
    lib = native.NativeLibrary(path, [f"tapead_run_{k}" for k in range(len(texts))], seconds,
                               cached)
    runs = [(blk.run_start, blk.start, blk.stop, lib.addresses[w])
            for blk, w in zip(blocks, which)]
    if lock is not None:
        with lock:
            tape.set_native_runs(runs, lib)
    else:
        tape.set_native_runs(runs, lib)
    return lib
