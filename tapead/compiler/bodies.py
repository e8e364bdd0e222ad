"""Native code for loop bodies: a scalar body as straight-line C, its T steps
as one C loop forward and one in reverse.

A scan over float carries (``ta.scan``, ``ta.scan(checkpoints=...)``) records
its body once, on a tape of scalar nodes, and runs the T steps in C
(``_core.ScalarLoop``) by walking that tape once per step.  This module turns
the body into code: every node's value is a C local, the reverse step
recomputes the step's values from its carries and accumulates the adjoints
in locals too, and the loops over the steps are C loops around them --

* ``fwd(T, carry, X, Y, traj, aux)``: the T steps, each step's carries kept
  in ``traj`` for the reverse and the values and partials of its libm calls
  (sin, exp, pow, ...: :data:`STORED`) in ``aux``, instead of every node's
  partials;
* ``rev(T, traj, X, GY, gc, GX, aux)``: the steps reversed, each step's
  arithmetic recomputed from its carries and ``aux``, and swept back;
* ``adv(T, carry, X)``, ``step`` and ``adj``: steps forward without keeping
  anything, one step forward and one step reversed, which the revolve schedule
  of a checkpointed scan runs;
* ``scan(ns, steps, carry, X, Y, traj)``: the steps of a list in its order,
  values only (the graph API's scans, whose backward loops are scans of their
  own bodies; ``_core.scalar_scan``).

Bits.  Each opcode's value and partials are the expressions of
``scalar_eval`` (``tapead/_core_kernel.pxi``) -- the same IEEE operations in
the same order and the same libm calls -- and the adjoints are accumulated in
the interpreter's order (nodes last to first, operand ``a`` before ``b``,
nodes whose adjoint is zero skipped), so a compiled loop gives the
interpreter's results bit for bit (the test suite checks every opcode).  A
body with an opcode not listed in :data:`RULES` keeps the interpreter.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Optional, Sequence

from tapead.compiler import native
from tapead.compiler.scalar_c import (  # noqa: F401  (RULES, STORED: named here too)
    PRELUDE, RULES, STORED, _BY_CODE, _FIRST_CONST, _INPUT, _OBJ, _literal, _sub)

__all__ = ["RULES", "STORED", "lower_body", "compile_loops", "lowerable"]


class _Body:
    """The checked structure of one ``ScalarLoop``'s body."""

    def __init__(self, spec):
        op, a, b, consts, cin, xin, outs, outc = spec[:8]
        # the column of a step's input row each x input reads, and the row's
        # length (by default: x input j reads column j of rows of len(xin))
        self.xcols = [int(c) for c in spec[8]] if len(spec) > 8 else list(range(len(xin)))
        self.row_len = int(spec[9]) if len(spec) > 9 else len(xin)
        # inputs written once before the steps (the loop's parameters): the
        # step function reads them from the tape's value slots, and a body
        # with parameters has no other function
        self.params = [int(i) for i in spec[10]] if len(spec) > 10 else []
        # only a step function: a body with parameters, or whose carries
        # outnumber its outputs (a backward body, whose carries are the
        # adjoints and the primal's carries)
        self.step_only = bool(self.params) or len(outs) < len(cin)
        self.op, self.a, self.b = [int(v) for v in op], [int(v) for v in a], \
            [int(v) for v in b]
        self.consts = [float(v) for v in consts]
        self.cin, self.xin, self.outs, self.outc = list(cin), list(xin), list(outs), list(outc)
        self.m, self.k, self.q = len(cin), len(xin), len(outs) - len(cin)
        # node -> its first slot in a step's row of stored values and partials
        self.slot: Dict[int, int] = {}
        width = 0
        for i, o in enumerate(self.op):
            if o in STORED:
                self.slot[i] = width
                width += 3 if o < _FIRST_CONST else 2
        self.aux_width = width

    def missing(self) -> List[str]:
        """What keeps this body on the interpreter (empty: it compiles)."""
        why = []
        inputs = set(self.cin) | set(self.xin) | set(self.params)
        packs = {i for i, o in enumerate(self.op) if o == _OBJ}
        if len(self.xcols) != self.k or not all(0 <= c < self.row_len for c in self.xcols):
            why.append("an x input reads a column outside the step's row")
        for i, o in enumerate(self.op):
            if o == _OBJ:
                continue                # ScalarLoop checked that no scalar node reads it
            if o != _INPUT and (self.a[i] in packs or (o < _FIRST_CONST and self.b[i] in packs)):
                why.append(f"node {i} reads an array node")
                continue
            if o == _INPUT:
                if i not in inputs:
                    why.append(f"input node {i} is neither a carry nor a step input")
                continue
            if o not in _BY_CODE:
                why.append(f"opcode {o} at node {i} has no lowering")
                continue
            if not 0 <= self.a[i] < i or (o < _FIRST_CONST and not 0 <= self.b[i] < i) or \
                    (o >= _FIRST_CONST and self.b[i] >= 0):
                why.append(f"node {i} has operands the interpreter reads otherwise")
        return why

    # -- the code -------------------------------------------------------------
    def _y(self, i):
        o = self.op[i]
        return f"v{self.b[i]}" if o < _FIRST_CONST else _literal(self.consts[i])

    def _names(self, i):
        return dict(x=f"v{self.a[i]}", y=self._y(i), v=f"v{i}", d0=f"d0_{i}")

    def values(self, carry: str, x: str, aux: str = "", mode: str = "") -> List[str]:
        """Statements computing every node's value ``v<i>`` from the carries and
        the step's row.  ``mode="store"``: the values and partials of the
        :data:`STORED` nodes are also written to the row ``aux``; ``"load"``:
        they are read from it instead of computed."""
        lines = []
        col = {n: self.xcols[j] for j, n in enumerate(self.xin)}
        car = {n: j for j, n in enumerate(self.cin)}
        for i, o in enumerate(self.op):
            if o == _OBJ:
                continue
            if o == _INPUT:
                src = f"{carry}[{car[i]}]" if i in car else \
                    f"{x}[{col[i]}]" if i in col else f"val[{i}]"       # a parameter
                lines.append(f"const double v{i} = {src};")
                continue
            _, value, d0, d1 = _BY_CODE[o]
            if mode == "load" and i in self.slot:
                lines.append(f"const double v{i} = {aux}[{self.slot[i]}];")
                continue
            lines.append(f"const double v{i} = "
                         f"{_sub(value, x=f'v{self.a[i]}', y=self._y(i), v='', d0='')};")
            if mode == "store" and i in self.slot:
                k, names = self.slot[i], self._names(i)
                lines.append(f"{aux}[{k}] = v{i}; {aux}[{k + 1}] = {_sub(d0, **names)};")
                if o < _FIRST_CONST:
                    names["d0"] = f"{aux}[{k + 1}]"
                    lines.append(f"{aux}[{k + 2}] = {_sub(d1, **names)};")
        return lines

    def out(self, j) -> str:
        i = self.outs[j]
        return f"v{i}" if i >= 0 else _literal(self.outc[j])

    def adjoints(self, gc: str, gy: str, gx: str, aux: str = "") -> List[str]:
        """Statements of the reverse step after :meth:`values`: the adjoints of
        the outputs (``gc``: the next carries, ``gy``: the ys) swept back to
        those of the carries (into ``gc``) and of the row (into ``gx``)."""
        n = len(self.op)
        lines = [f"double g{i} = 0.0;" for i in range(n) if self.op[i] != _OBJ]
        for j in range(self.m):
            if self.outs[j] >= 0:
                lines.append(f"g{self.outs[j]} += {gc}[{j}];")
        for j in range(self.q):
            if self.outs[self.m + j] >= 0:
                lines.append(f"g{self.outs[self.m + j]} += {gy}[{j}];")
        for i in range(n - 1, -1, -1):
            o = self.op[i]
            if o == _INPUT or o == _OBJ:
                continue
            _, _, d0, d1 = _BY_CODE[o]
            names = self._names(i)
            if aux and i in self.slot:      # the partials the forward run stored
                d0, d1, names = f"{aux}[{self.slot[i] + 1}]", f"{aux}[{self.slot[i] + 2}]", {}
            body = [f"const double d0_{i} = {_sub(d0, **names) if names else d0};",
                    f"g{self.a[i]} += g{i} * d0_{i};"]
            if o < _FIRST_CONST:
                body.append(f"g{self.b[i]} += g{i} * ({_sub(d1, **names) if names else d1});")
            lines.append(f"if (g{i} != 0.0) {{ " + " ".join(body) + " }")
        for j, node in enumerate(self.cin):
            lines.append(f"{gc}[{j}] = g{node};")
        for j, node in enumerate(self.xin):
            lines.append(f"{gx}[{j}] = g{node};")
        return lines

    def source(self, name: str) -> str:
        """The functions of this body, ``<name>_step``, ``_adv``, ``_fwd``,
        ``_adj``, ``_rev`` and ``_scan`` (see the module doc); only ``_step``
        for a body with parameters or more carries than outputs."""
        m, k, q, w, r = self.m, self.k, self.q, max(self.m, 1), self.row_len
        ind = "\n    "
        vals = ind.join(self.values("c", "x"))
        step_outs = ind.join(f"val[{self.outs[j]}] = {self.out(j)};"
                             for j in range(len(self.outs)) if self.outs[j] >= 0)
        step = f"""
/* a loop body of {len(self.op)} nodes: {m} carries, {k} step inputs, {len(self.outs)} outputs */
void {name}_step(const double *c, const double *x, double *val) {{
    {vals}
    {step_outs}
}}
"""
        if self.step_only:
            return step
        aw = max(self.aux_width, 1)
        keep = ind.join([f"traj[{w} * t + {j}] = cl[{j}];" for j in range(m)] +
                        [f"double *a = aux + {aw} * t;", "(void) a;"])
        loop_vals = ind.join(self.values("cl", "x"))
        kept_vals = ind.join(self.values("cl", "x", "a", "store"))
        adj_kept = ind.join(self.values("c", "x", "a", "load") +
                            self.adjoints("gc", "gy", "gx", "a"))
        next_c = ind.join(f"cl[{j}] = {self.out(j)};" for j in range(m))
        ys = ind.join(f"Y[{q} * t + {j}] = {self.out(m + j)};" for j in range(q))
        adj = ind.join(self.values("c", "x") + self.adjoints("gc", "gy", "gx"))
        load = f"double cl[{w}] = {{0.0}}; for (int j = 0; j < {m}; j++) cl[j] = c[j];"
        store = f"for (int j = 0; j < {m}; j++) c[j] = cl[j];"

        def steps(kept):
            return f"""for (npy_intp t = 0; t < T; t++) {{
    const double *x = X + {r} * t;
    (void) x;
    {keep if kept else ""}
    {kept_vals if kept else loop_vals}
    {next_c}
    {ys}
  }}"""
        def scan_steps(kept):
            row = ind.join(f"traj[{m} * t + {j}] = cl[{j}];" for j in range(m))
            return f"""for (npy_intp s = 0; s < ns; s++) {{
    const npy_intp t = steps[s];
    const double *x = X + {r} * t;
    (void) x;
    {row if kept else ""}
    {loop_vals}
    {next_c}
    {ys}
  }}"""
        # the carries live in a local array (registers), not behind the pointer
        # that Y and traj might alias
        return step + f"""
void {name}_adv(npy_intp T, double *c, const double *X) {{
  {load}
  for (npy_intp t = 0; t < T; t++) {{
    const double *x = X + {r} * t;
    (void) x;
    {loop_vals}
    {next_c}
  }}
  {store}
}}

/* with traj: each step's carries kept in traj, the values and partials of
   its libm calls in aux (rows of {aw}) */
void {name}_fwd(npy_intp T, double *c, const double *X, double *Y, double *traj,
                double *aux) {{
  {load}
  if (traj) {{
  {steps(True)}
  }} else {{
  {steps(False)}
  }}
  {store}
}}

static inline void {name}_adj_step(const double *c, const double *x, const double *gy,
                                   double *gc, double *gx) {{
    (void) x; (void) gy; (void) gx;
    {adj}
}}

void {name}_adj(const double *c, const double *x, const double *gy, double *gc,
                double *gx) {{
  {name}_adj_step(c, x, gy, gc, gx);
}}

static inline void {name}_adj_kept(const double *c, const double *x, const double *gy,
                                   double *gc, double *gx, const double *a) {{
    (void) x; (void) gy; (void) gx; (void) a;
    {adj_kept}
}}

void {name}_rev(npy_intp T, const double *traj, const double *X, const double *GY,
                double *gc, double *GX, const double *aux) {{
  double gl[{w}] = {{0.0}};
  for (int j = 0; j < {m}; j++) gl[j] = gc[j];
  for (npy_intp t = T - 1; t >= 0; t--)
    {name}_adj_kept(traj + {w} * t, X + {r} * t, GY + {q} * t, gl, GX + {k} * t,
                    aux + {aw} * t);
  for (int j = 0; j < {m}; j++) gc[j] = gl[j];
}}

/* the steps steps[0], ..., steps[ns - 1] in that order, values only (a scan of
   the graph API, _core.scalar_scan): step t reads row t of X and writes row t
   of Y, and, when traj is not NULL, the carries entering it to row t of traj
   (rows of {m}) */
void {name}_scan(npy_intp ns, const npy_intp *steps, double *c, const double *X,
                 double *Y, double *traj) {{
  {load}
  if (traj) {{
  {scan_steps(True)}
  }} else {{
  {scan_steps(False)}
  }}
  {store}
}}
"""


def lowerable(loop) -> bool:
    """Whether ``loop``'s body (a ``_core.ScalarLoop``) has a lowering for every
    node."""
    return not _Body(loop.body_spec()).missing()


def lower_body(loop, name: str = "tapead_body") -> str:
    """The C source of ``loop``'s body (``ValueError`` naming what has no
    lowering)."""
    body = _Body(loop.body_spec())
    why = body.missing()
    if why:
        raise ValueError("the loop body cannot be compiled: " + "; ".join(why[:3]))
    return PRELUDE + body.source(name)


_loaded: Dict[str, native.NativeLibrary] = {}
_lock = threading.Lock()
PARTS = ("step", "fwd", "rev", "adj", "adv", "scan")   # a body's functions, in address order


def library(source: str, count: int, parts: Sequence[str] = PARTS,
            names: Sequence[str] = ()) -> native.NativeLibrary:
    """The loaded library of ``count`` bodies ``tapead_body_<k>`` whose C is
    ``source``, with functions ``parts`` each, then the functions ``names``
    (built, or found on disk, once per process; the compiler runs outside the
    lock, so scans that only look a body up do not wait)."""
    with _lock:
        lib = _loaded.get(source)
    if lib is None:
        path, seconds, cached = native._build(source, "loops", native._flags())
        lib = native.NativeLibrary(path, [f"tapead_body_{k}_{part}" for k in range(count)
                                          for part in parts] + list(names), seconds, cached)
        with _lock:
            lib = _loaded.setdefault(source, lib)
    return lib


def compile_loops(loops: Sequence, lock=None) -> Optional[native.NativeLibrary]:
    """Compile the bodies of ``loops`` (``_core.ScalarLoop`` objects) into one
    library and point each loop at its functions (``ScalarLoop.set_native``,
    under ``lock`` when given: the loops' replays hold it).  Bodies with the
    same code share functions; loops whose body has no lowering keep the
    interpreter.  Returns the library, or None (nothing to compile, or no
    compiler)."""
    if not loops or not native.available():
        return None
    texts: Dict[str, int] = {}
    which, widths = [], {}
    for loop in loops:
        body = _Body(loop.body_spec())
        if body.missing():
            which.append(None)
            continue
        text = body.source("@NAME@")
        which.append(texts.setdefault(text, len(texts)))
        widths[texts[text]] = body.aux_width
    if not texts:
        return None
    source = PRELUDE + "".join(t.replace("@NAME@", f"tapead_body_{k}")
                               for t, k in texts.items())
    lib = library(source, len(texts))
    for loop, k in zip(loops, which):
        if k is None:
            continue
        step, fwd, rev, adj, adv = lib.addresses[len(PARTS) * k:len(PARTS) * k + 5]
        width = widths[k]
        if lock is not None:
            with lock:
                loop.set_native(lib, step, fwd, rev, adj, adv, width)
        else:
            loop.set_native(lib, step, fwd, rev, adj, adv, width)
    return lib
