"""C source for fused groups: one loop per group (``tapead.compiler.native``
compiles it).

A group's operations become C expressions (:data:`LOWERINGS`) over locals,
one loop over the group's elements.  A group with full sums computes its
elements in the leaves of numpy's pairwise summation, so each sum has
numpy's bits; from :data:`SPLIT` elements the two halves of the loop (or of
the top pairwise split) run on two threads.  Which lowerings may be used on
a machine is decided by the probe in :mod:`tapead.compiler.native`.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

__all__ = ["LOWERINGS", "PRELUDE", "SPLIT", "kernel"]

SPLIT = 32768     # elements from which a kernel runs its two halves on two threads


# ufunc -> (number of inputs, C expression over {0}, {1}).  Each entry is used
# only where the probe finds numpy's bits.
LOWERINGS: Dict[np.ufunc, tuple] = {
    np.add: (2, "({0} + {1})"),
    np.subtract: (2, "({0} - {1})"),
    np.multiply: (2, "({0} * {1})"),
    np.true_divide: (2, "({0} / {1})"),
    np.negative: (1, "(-{0})"),
    np.positive: (1, "(+{0})"),
    np.square: (1, "({0} * {0})"),
    np.reciprocal: (1, "(1.0 / {0})"),
    np.sqrt: (1, "sqrt({0})"),
    np.absolute: (1, "fabs({0})"),
    np.sin: (1, "sin({0})"),
    np.cos: (1, "cos({0})"),
    np.tan: (1, "tan({0})"),
    np.exp: (1, "exp({0})"),
    np.expm1: (1, "expm1({0})"),
    np.log: (1, "log({0})"),
    np.log1p: (1, "log1p({0})"),
    np.tanh: (1, "tanh({0})"),
    np.sinh: (1, "sinh({0})"),
    np.cosh: (1, "cosh({0})"),
    np.arctan: (1, "atan({0})"),
    np.power: (2, "pow({0}, {1})"),
    np.maximum: (2, "tapead_max({0}, {1})"),
    np.minimum: (2, "tapead_min({0}, {1})"),
}

PRELUDE = """\
#include <math.h>
#include <stddef.h>
#include <pthread.h>
typedef ptrdiff_t npy_intp;
/* threads a kernel may use (1 or 2): set by tapead when it loads the library */
int tapead_threads = 1;
/* one half of a kernel's range, on a thread of its own */
typedef void (*tapead_part)(char *const *, const npy_intp *, double *, npy_intp, npy_intp,
                            double *);
struct tapead_job {
    tapead_part fn; char *const *base; const npy_intp *step; double *scal;
    npy_intp a, b; double *acc;
};
static void *tapead_run_job(void *p) {
    struct tapead_job *j = (struct tapead_job *)p;
    j->fn(j->base, j->step, j->scal, j->a, j->b, j->acc);
    return NULL;
}
/* run fn(a1, b1, acc1) on a second thread and fn(a0, b0, acc0) here; 0 when no
   thread could be started (nothing was run) */
static int tapead_two(tapead_part fn, char *const *base, const npy_intp *step, double *scal,
                      npy_intp a0, npy_intp b0, double *acc0,
                      npy_intp a1, npy_intp b1, double *acc1) {
    pthread_t t;
    struct tapead_job job = {fn, base, step, scal, a1, b1, acc1};
    if (pthread_create(&t, NULL, tapead_run_job, &job) != 0) return 0;
    fn(base, step, scal, a0, b0, acc0);
    pthread_join(t, NULL);
    return 1;
}
/* numpy's maximum/minimum: a NaN in either argument is the result; of two
   equal arguments (0.0 and -0.0), the second */
static inline double tapead_max(double a, double b) {
    return (a > b || a != a) ? a : b;
}
static inline double tapead_min(double a, double b) {
    return (a < b || a != a) ? a : b;
}
/* numpy's pairwise summation of a leaf (at most 128 values) */
static inline double tapead_leaf_sum(const double *a, npy_intp n) {
    if (n < 8) {
        double res = 0.0;
        for (npy_intp i = 0; i < n; i++) res += a[i];
        return res;
    }
    double r[8];
    npy_intp i;
    for (int k = 0; k < 8; k++) r[k] = a[k];
    for (i = 8; i < n - (n % 8); i += 8)
        for (int k = 0; k < 8; k++) r[k] += a[i + k];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
}
"""

_SLOT_TEMP, _SLOT_ARRAY, _SLOT_SCALAR, _SLOT_OUTPUT, _SLOT_REDUCE = 0, 1, 2, 3, 4


def _body(group):
    """The loop body's statements (reading array slot s as ``v{s}``) and the
    sums' (input slot, output slot)."""
    body, sums = [], []
    for u, ins, out in group.ops:
        if u is None:
            sums.append((ins[0], out))
        else:
            body.append(f"const double v{out} = "
                        f"{LOWERINGS[u][1].format(*[f'v{i}' for i in ins])};")
    return body, sums


def kernel(name: str, group) -> str:
    """C source of one group's kernel."""
    kinds = [k for k, _, _ in group.slots]
    if any(k == _SLOT_REDUCE for k in kinds):
        return _reducing_kernel(name, group)
    arrays = [s for s, k in enumerate(kinds) if k == _SLOT_ARRAY]
    outs = [s for s, k in enumerate(kinds) if k == _SLOT_OUTPUT]
    lines = [f"static void {name}_part(char *const *base, const npy_intp *step, double *scal,"
             " npy_intp lo, npy_intp hi, double *unused) {"]
    for s, k in enumerate(kinds):
        if k == _SLOT_SCALAR:
            lines.append(f"  const double v{s} = scal[{s}];")
    body, _ = _body(group)
    body += [f"o{s}[i] = v{s};" for s in outs]

    def loop(read):
        code = ["    for (npy_intp i = lo; i < hi; i++) {"]
        code += [f"      const double v{s} = {read(s)};" for s in arrays]
        code += [f"      {b}" for b in body]
        code.append("    }")
        return code

    for s in outs:
        lines.append(f"  double *restrict o{s} = (double *)base[{s}];")
    if arrays:
        contiguous = " && ".join(f"step[{s}] == 8" for s in arrays)
        lines.append(f"  if ({contiguous}) {{")
        for s in arrays:
            lines.append(f"    const double *restrict p{s} = (const double *)base[{s}];")
        lines += loop(lambda s: f"p{s}[i]")
        lines.append("  } else {")
        lines += loop(lambda s: f"*(const double *)(base[{s}] + i * step[{s}])")
        lines.append("  }")
    else:
        lines += loop(None)
    lines.append("}")
    lines += [f"void {name}(char *const *base, const npy_intp *step, double *scal, npy_intp n) {{",
              f"  if (n >= {SPLIT} && tapead_threads > 1 &&",
              f"      tapead_two({name}_part, base, step, scal, 0, n / 2, NULL, n / 2, n, NULL))",
              "    return;",
              f"  {name}_part(base, step, scal, 0, n, NULL);", "}"]
    return "\n".join(lines)


def _reducing_kernel(name: str, group) -> str:
    """C source of a group with full sums: the elements are computed in the
    leaves of numpy's pairwise summation (blocks of at most 128, eight
    accumulators, halves split at multiples of 8), so each sum has numpy's
    bits and no summed value is stored as an array."""
    kinds = [k for k, _, _ in group.slots]
    arrays = [s for s, k in enumerate(kinds) if k == _SLOT_ARRAY]
    outs = [s for s, k in enumerate(kinds) if k == _SLOT_OUTPUT]
    body, sums = _body(group)
    R = len(sums)
    args = "char *const *base, const npy_intp *step, double *scal"
    lines = [f"static void {name}_leaf({args}, npy_intp lo, npy_intp m, double *acc) {{",
             f"  double buf[{R}][128];"]
    for s, k in enumerate(kinds):
        if k == _SLOT_SCALAR:
            lines.append(f"  const double v{s} = scal[{s}];")
    lines.append("  for (npy_intp j = 0; j < m; j++) {")
    lines.append("    const npy_intp i = lo + j;")
    lines += [f"    const double v{s} = *(const double *)(base[{s}] + i * step[{s}]);"
              for s in arrays]
    lines += [f"    {b}" for b in body]
    lines += [f"    ((double *)base[{s}])[i] = v{s};" for s in outs]
    lines += [f"    buf[{r}][j] = v{src};" for r, (src, _) in enumerate(sums)]
    lines.append("  }")
    lines.append(f"  for (int r = 0; r < {R}; r++) acc[r] = tapead_leaf_sum(buf[r], m);")
    lines.append("}")
    lines += [f"static void {name}_range({args}, npy_intp lo, npy_intp m, double *acc) {{",
              "  if (m <= 128) {", f"    {name}_leaf(base, step, scal, lo, m, acc);",
              "    return;", "  }",
              "  npy_intp m2 = m / 2;", "  m2 -= m2 % 8;", f"  double right[{R}];",
              f"  {name}_range(base, step, scal, lo, m2, acc);",
              f"  {name}_range(base, step, scal, lo + m2, m - m2, right);",
              f"  for (int r = 0; r < {R}; r++) acc[r] += right[r];", "}"]
    # the two halves of the top split are independent sums: on two threads
    # when large, added as numpy adds them
    lines += [f"void {name}({args}, npy_intp n) {{", f"  double acc[{R}], right[{R}];",
              f"  for (int r = 0; r < {R}; r++) acc[r] = 0.0;",
              "  npy_intp n2 = n / 2;", "  n2 -= n2 % 8;",
              f"  if (n >= {SPLIT} && n > 128 && tapead_threads > 1 &&",
              f"      tapead_two({name}_range, base, step, scal, 0, n2, acc, n2, n - n2, right)) {{",
              f"    for (int r = 0; r < {R}; r++) acc[r] += right[r];",
              "  } else if (n > 0) {",
              f"    {name}_range(base, step, scal, 0, n, acc);", "  }"]
    lines += [f"  scal[{dst}] = acc[{r}];" for r, (_, dst) in enumerate(sums)]
    lines.append("}")
    return "\n".join(lines)
