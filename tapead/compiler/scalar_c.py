"""The C of tapead's scalar opcodes, for the compilers of loop bodies and
scalar runs (``tapead.compiler.bodies``, ``tapead.compiler.runs``).

:data:`RULES` gives each opcode's value and partials as the expressions of
``scalar_eval`` (``tapead/_core_kernel.pxi``) -- the same IEEE operations in
the same order and the same libm calls -- so that compiled code gives the
interpreter's bits; :data:`PRELUDE` holds the kernel's helpers in C.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from tapead import _core

__all__ = ["RULES", "STORED", "PRELUDE"]

_OP = dict(_core.OPCODES, **_core.CONST_OPCODES)
_INPUT = _core.STRUCTURAL_OPCODES["input"]
_OBJ = _core.STRUCTURAL_OPCODES["obj"]      # in a body: a small vector of its scalars
_FIRST_CONST = min(_core.CONST_OPCODES.values())

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
