"""Worked examples of an introduction to automatic differentiation, computed by tapead.

Run with ``python -m tapead.examples.demo``.
"""
from __future__ import annotations

import numpy as np

import tapead as ta
import tapead.numpy as tnp


def f(x, y):
    return x * y + tnp.sin(x)


def main() -> None:
    x, y = 1.0, 2.0
    print("f(x, y) = x*y + sin(x) at (1, 2)")
    _, dx = ta.jvp(f, (x, y), (1.0, 0.0))
    _, dy = ta.jvp(f, (x, y), (0.0, 1.0))
    print(f"  forward mode, two passes:   df/dx = {dx:.4f}, df/dy = {dy:.4f}")
    gx, gy = ta.grad(f, argnums=(0, 1))(x, y)
    print(f"  reverse mode, one sweep:    df/dx = {gx:.4f}, df/dy = {gy:.4f}")

    _, pullback = ta.vjp(lambda x, y: (x * y, tnp.sin(x)), x, y)
    u = pullback((2.0, -1.0))
    print(f"  VJP of (xy, sin x) with u = (2, -1): ({u[0]:.4f}, {u[1]:.4f})")

    hv = ta.hvp(f, (x, y), (1.0, 0.0))
    print(f"  HVP with v = (1, 0), forward over reverse: [{hv[0]:.7f}, {hv[1]:.1f}]")

    record = ta.record(f, x, y)
    print(f"  its tape: {record.n_nodes} nodes, "
          f"{ta.Tape.bytes_per_scalar_node} bytes per scalar node")

    def sum_sin(xs):
        s = 0.0
        for i in range(len(xs) - 1):
            s = s + tnp.sin(xs[i]) * xs[i + 1]
        return s

    xs = list(np.linspace(0.0, 1.0, 5))
    g = ta.grad(sum_sin)([float(v) for v in xs])
    print("gradient of sum_i sin(x_i) x_{i+1} at linspace(0, 1, 5):")
    print("  ", np.round(np.array(g, dtype=float), 6))


if __name__ == "__main__":
    main()
