"""The programs of Scaly's control-flow page, shared by the control-flow tests.

Written exactly as on the page (with ``import tapead.scaly as sc``).
"""
import numpy as np

import tapead.scaly as sc


@sc.function(sc.arg("x", 2), sc.arg("u", ()))
def model(x: sc.Expr, u: sc.Expr) -> tuple[sc.Expr, sc.Expr]:
    xnext = x + 0.1 * sc.stack([x[1], u])
    return xnext, sc.sumsqr(x)


@sc.function(sc.arg("x0", 2), sc.arg("controls", 20),
             outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
def rollout(x0: sc.Expr, controls: sc.Expr) -> tuple[sc.Expr, sc.Expr]:
    final, (costs,) = sc.scan(model, x0, (controls,), length=20)
    return final, costs.sum()


@sc.function(sc.arg("x", ()), sc.arg("a", ()),
             outputs=sc.arg("go", sc.TensorType((), sc.dtypes.bool_)))
def unsolved(x: sc.Expr, a: sc.Expr) -> sc.Expr:
    return (x * x - a).abs() > 1e-12


@sc.function(sc.arg("x", ()), sc.arg("a", ()))
def newton(x: sc.Expr, a: sc.Expr) -> sc.Expr:
    return 0.5 * (x + a / x)


@sc.function(sc.arg("a", ()), outputs=sc.arg("root", ()))
def root(a: sc.Expr) -> sc.Expr:
    value, count = sc.while_loop(unsolved, newton, sc.const(1.0),
                                 max_iter=30, params=(a,))
    return value


@sc.function(sc.arg("x", ()), outputs=sc.arg("root", ()))
def negative_root(x: sc.Expr) -> sc.Expr:
    return (-x).sqrt()


@sc.function(sc.arg("x", ()), outputs=sc.arg("root", ()))
def positive_root(x: sc.Expr) -> sc.Expr:
    return x.sqrt()


@sc.function(sc.arg("x", ()), outputs=sc.arg("root", ()))
def absolute_root(x: sc.Expr) -> sc.Expr:
    return sc.cond(x > 0.0, (negative_root, positive_root), x)


@sc.function(sc.arg("x", ()))
def printed_step(x: sc.Expr) -> sc.Expr:
    value = sc.print("x={}", x)
    return value * value + 1.0


@sc.function(sc.arg("initial", ()), outputs=sc.arg("final", ()))
def printed_rollout(initial: sc.Expr) -> sc.Expr:
    return sc.scan(printed_step, initial, length=3)[0]


def numpy_rollout(x0, controls):
    """The rollout unrolled in numpy."""
    x, cost = np.array(x0, dtype=float), 0.0
    for u in controls:
        cost += float(x @ x)
        x = x + 0.1 * np.array([x[1], u])
    return x, cost
