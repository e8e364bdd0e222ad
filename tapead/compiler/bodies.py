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

import numpy as np

from tapead import _core
from tapead.compiler import native

__all__ = ["RULES", "STORED", "lower_body", "compile_loops", "lowerable"]

_OP = dict(_core.OPCODES, **_core.CONST_OPCODES)
_INPUT = _core.STRUCTURAL_OPCODES["input"]
_OBJ = _core.STRUCTURAL_OPCODES["obj"]      # in a body: a small vector of its scalars
_FIRST_CONST = min(_core.CONST_OPCODES.values())
_FIRST_UNARY = min(v for k, v in _core.OPCODES.items() if v > _FIRST_CONST)

# opcode name -> (value, d value / d x, d value / d y) over x, y (the second
# operand, or the constant of a constant op), v (the value) and d0 (the first
# partial): scalar_eval's branches, written as C.
RULES: Dict[str, tuple] = {
    "add": ("x + y", "1.0", "1.0"),
    "sub": ("x - y", "1.0", "-1.0"),
    "mul": ("x * y", "y", "x"),
    "div": ("x / y", "1.0 / y", "-v / y"),
    "pow": ("pow(x, y)", "tp_pow_base_partial(x, y)", "tp_pow_exp_partial(x, v)"),
    "maximum": ("(x >= y ? x : y)", "(x > y ? 1.0 : (x == y ? 0.5 : 0.0))", "1.0 - d0"),
    "minimum": ("(x <= y ? x : y)", "(x < y ? 1.0 : (x == y ? 0.5 : 0.0))", "1.0 - d0"),
    "arctan2": ("atan2(x, y)", "y / (x * x + y * y)", "-x / (x * x + y * y)"),
    "hypot": ("sqrt(x * x + y * y)", "x / v", "y / v"),
    "addc": ("x + y", "1.0", None),
    "subc": ("x - y", "1.0", None),
    "rsubc": ("y - x", "-1.0", None),
    "mulc": ("x * y", "y", None),
    "divc": ("x / y", "1.0 / y", None),
    "rdivc": ("y / x", "-v / x", None),
    "powc": ("tp_powc_value(x, y)", "tp_powc_partial(x, y)", None),
    "rpowc": ("pow(y, x)", "tp_pow_exp_partial(y, v)", None),
    "neg": ("-x", "-1.0", None),
    "pos": ("x", "1.0", None),
    "abs": ("fabs(x)", "(x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0))", None),
    "sign": ("(x > 0 ? 1.0 : (x < 0 ? -1.0 : (x == 0 ? 0.0 : x)))", "0.0", None),
    "relu": ("(x > 0 ? x : 0.0)", "(x > 0 ? 1.0 : 0.0)", None),
    "sin": ("sin(x)", "cos(x)", None),
    "cos": ("cos(x)", "-sin(x)", None),
    "tan": ("tan(x)", "1.0 + v * v", None),
    "exp": ("exp(x)", "v", None),
    "log": ("log(x)", "1.0 / x", None),
    "log1p": ("log1p(x)", "1.0 / (1.0 + x)", None),
    "expm1": ("expm1(x)", "v + 1.0", None),
    "sqrt": ("sqrt(x)", "0.5 / v", None),
    "tanh": ("tanh(x)", "1.0 - v * v", None),
    "arctan": ("atan(x)", "1.0 / (1.0 + x * x)", None),
    "arcsin": ("asin(x)", "1.0 / sqrt(1.0 - x * x)", None),
    "arccos": ("acos(x)", "-1.0 / sqrt(1.0 - x * x)", None),
    "sinh": ("sinh(x)", "cosh(x)", None),
    "cosh": ("cosh(x)", "sinh(x)", None),
    "sigmoid": ("tp_sigmoid(x)", "v * (1.0 - v)", None),
    "square": ("x * x", "2.0 * x", None),
    "reciprocal": ("1.0 / x", "-v * v", None),
    "exp2": ("exp2(x)", "v * TP_LN2", None),
    "log2": ("log2(x)", "1.0 / (x * TP_LN2)", None),
    "log10": ("log10(x)", "1.0 / (x * TP_LN10)", None),
    "arcsinh": ("asinh(x)", "1.0 / sqrt(x * x + 1.0)", None),
    "arccosh": ("acosh(x)", "1.0 / sqrt(x * x - 1.0)", None),
    "arctanh": ("atanh(x)", "1.0 / (1.0 - x * x)", None),
    "cbrt": ("cbrt(x)", "1.0 / (3.0 * v * v)", None),
}
_BY_CODE = {_OP[name]: (name,) + rule for name, rule in RULES.items()}

# ops whose value or partials call libm: a forward run that keeps for the
# reverse stores their value and partials (the reverse recomputes only the
# arithmetic around them, and sin and cos of one argument are one sincos)
STORED = frozenset(_OP[name] for name in (
    "pow", "arctan2", "powc", "rpowc", "sin", "cos", "tan", "exp", "log", "log1p", "expm1",
    "tanh", "arctan", "arcsin", "arccos", "sinh", "cosh", "sigmoid", "exp2", "log2", "log10",
    "arcsinh", "arccosh", "arctanh", "cbrt"))

PRELUDE = """\
#include <math.h>
#include <stddef.h>
typedef ptrdiff_t npy_intp;
int tapead_threads = 1;     /* read by tapead's loader; loop bodies run on one thread */
#define TP_LN2 0.6931471805599453
#define TP_LN10 2.302585092994046
/* scalar_eval's helpers (tapead/_core_kernel.pxi), the same operations */
static inline double tp_pow_base_partial(double x, double c) {
  if (c == 0.0) return 0.0;
  return c * pow(x, c - 1.0);
}
static inline double tp_powc_value(double x, double c) {
  double t;
  if (c == 2.0) return x * x;
  if (c == 3.0) return x * x * x;
  if (c == 4.0) { t = x * x; return t * t; }
  if (c == -1.0) return 1.0 / x;
  if (c == 0.5 && x > 0.0) return sqrt(x);
  return pow(x, c);
}
static inline double tp_powc_partial(double x, double c) {
  if (c == 2.0) return 2.0 * x;
  if (c == 3.0) return 3.0 * (x * x);
  if (c == 4.0) return 4.0 * (x * x * x);
  if (c == -1.0) return -1.0 / (x * x);
  if (c == 0.5) return 0.5 / sqrt(x);
  return tp_pow_base_partial(x, c);
}
static inline double tp_pow_exp_partial(double x, double v) {
  if (v == 0.0) return 0.0;
  return v * log(x);
}
static inline double tp_sigmoid(double x) {
  double t;
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  t = exp(x);
  return t / (1.0 + t);
}
"""


def _literal(c: float) -> str:
    """An exact C literal of the double ``c``."""
    c = float(c)
    if np.isnan(c):
        return "NAN"
    if np.isinf(c):
        return "INFINITY" if c > 0 else "(-INFINITY)"
    return f"({c.hex()})"


def _sub(expr: str, **names: str) -> str:
    """``expr`` with the one-letter operands x, y, v and d0 replaced."""
    out, i = [], 0
    while i < len(expr):
        if expr.startswith("d0", i) and not expr[i + 2:i + 3].isalnum():
            out.append(names["d0"])
            i += 2
            continue
        ch = expr[i]
        prev = expr[i - 1] if i else " "
        nxt = expr[i + 1] if i + 1 < len(expr) else " "
        if ch in "xyv" and not (prev.isalnum() or prev == "_") and \
                not (nxt.isalnum() or nxt == "_"):
            out.append(names[ch])
        else:
            out.append(ch)
        i += 1
    return "".join(out)


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


def library(source: str, count: int, parts: Sequence[str] = PARTS) -> native.NativeLibrary:
    """The loaded library of ``count`` bodies ``tapead_body_<k>`` whose C is
    ``source``, with functions ``parts`` each (built, or found on disk, once
    per process; the compiler runs outside the lock, so scans that only look
    a body up do not wait)."""
    with _lock:
        lib = _loaded.get(source)
    if lib is None:
        path, seconds, cached = native._build(source, "loops", native._flags())
        lib = native.NativeLibrary(path, [f"tapead_body_{k}_{part}" for k in range(count)
                                          for part in parts], seconds, cached)
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
