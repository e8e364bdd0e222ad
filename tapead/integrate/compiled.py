"""The tangent system's right-hand side as one C function.

Forward sensitivities (and reverse mode through them) call the tangent
right-hand side ``[f; T]`` about once per step of the solver, each call a
replay and a reverse sweep of the Jacobian tape (``RhsKernel._record_jacobian``:
``n`` copies of ``f`` on copies of the inputs, whose one sweep gives every row
of the Jacobian) followed by ``T[k] = df/dy Y[k] + df/dp Pdot[k]`` in numpy:
a few microseconds of Python around well under one of arithmetic.  Here
that tape becomes straight-line C (``tapead.compiler.bodies``: each node's
value and partials are the interpreter's expressions, the adjoints swept in
its order) together with the products for ``T``, and the solver's callback
is one call of it.

A tape is compiled in a background thread the second time its structure is
seen in a process (``tapead.compiler.eager``), so the first solves keep the
tape; a tape with a node that has no C form here (a recorded branch, an
array operation) keeps it always.
"""
from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

from tapead.compiler import eager
from tapead.compiler.bodies import _Body

__all__ = ["compiled_tangent"]

#: steps x nodes from which a Jacobian tape is worth compiling
MIN_WORK = 2048


def _source(spec) -> Optional[tuple]:
    """(C source, [function name]) of the tangent right-hand side of the
    Jacobian tape ``spec`` (its shape ``(n, P)`` in ``spec[11]``), or None."""
    n, P = spec[11]
    body = _Body(spec[:11])
    if body.missing():
        return None
    w = n + 1 + P
    lines = body.values("c", "x") + body.adjoints("gc", "gy", "gx")
    ind = "\n  "
    return f"""
/* the tangent system's right-hand side: n = {n} states, P = {P} parameters */
void tapead_tangent(const double *u, double t, const double *p, const double *Pd,
                    npy_intp K, double *out) {{
  double x[{w + 1}];
  const double gy[1] = {{1.0}};
  double gc[1];
  double gx[{max(len(body.xin), 1)}];
  (void) gc;
  for (int j = 0; j < {n}; j++) x[j] = u[j];
  x[{n}] = t;
  for (int q = 0; q < {P}; q++) x[{n + 1} + q] = p[q];
  x[{w}] = 0.0;
  {ind.join(lines)}
  for (int i = 0; i < {n}; i++) out[i] = gx[{n * w} + i];      /* f */
  for (npy_intp k = 0; k < K; k++) {{
    const double *Y = u + {n} + {n} * k, *D = Pd + {P} * k;
    (void) D;
    for (int i = 0; i < {n}; i++) {{
      const double *J = gx + {w} * i;       /* row i: df_i/dy, df_i/dt, df_i/dp */
      double acc = 0.0;
      for (int j = 0; j < {n}; j++) acc += J[j] * Y[j];
      for (int q = 0; q < {P}; q++) acc += J[{n + 1} + q] * D[q];
      out[{n} + {n} * k + i] = acc;
    }}
  }}
}}
""", ["tapead_tangent"]


_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_void_p)


def compiled_tangent(tape, out_node: int, n: int, P: int, p: np.ndarray, Pdot: np.ndarray,
                     calls: int):
    """``fun(u, t)`` giving ``[f; T]`` (as ``RhsKernel.tangent_fun``) through
    the compiled Jacobian tape ``tape`` (its output ``out_node``) at the
    parameters ``p`` and parameter tangents ``Pdot`` (K, P), once this process
    has compiled its structure; else None.  ``calls``: about how many calls a
    solve makes."""
    op, a, b = tape.export_nodes()
    ins = [int(i) for i in tape.inputs]
    w = n + 1 + P
    if len(ins) != n * w + n:
        return None
    cols = [k % w for k in range(n * w)] + [w] * n      # copies read one row; c_i = 0
    spec = (op, a, b, tape.node_constants(), [], ins, [int(out_node)], [0.0], cols,
            w + 1, [], (n, P))
    found = eager.compiled(spec, calls, MIN_WORK, small=True, make=_source)
    if found is None:
        return None
    lib, addresses, _ = found
    fn = _SIGNATURE(addresses[0])
    K = Pdot.shape[0]
    pbuf = np.ascontiguousarray(p, dtype=np.float64).reshape(-1).copy()
    dbuf = np.ascontiguousarray(Pdot, dtype=np.float64).copy()
    ubuf, out = np.empty(n + K * n), np.empty(n + K * n)
    pu, pp, pd, po = (v.ctypes.data for v in (ubuf, pbuf, dbuf, out))

    def fun(u, t):
        ubuf[:] = u
        fn(pu, t, pp, pd, K, po)
        return out.copy()
    fun.library = lib                   # kept loaded while fun lives
    fun.buffers = (pbuf, dbuf)
    return fun
