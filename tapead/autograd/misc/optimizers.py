"""autograd's optimizers: ``sgd`` (with momentum), ``rmsprop``, ``adam``.

Each is ``optimizer(grad, x0, callback=None, num_iters=..., step_size=...,
...)`` with ``grad(x, i)`` the gradient at iteration ``i`` and
``callback(x, i, g)`` called before each update; ``x0`` may be any nesting
of tuples, lists and dicts of arrays (flattened with
``tapead.autograd.misc.flatten``), and the result has its structure.  The
updates are autograd's, operation for operation, so the trajectories are
the same numbers; they are written with differentiable operations, so an
optimizer run can itself be differentiated.

>>> import numpy as np
>>> from tapead.autograd import grad
>>> from tapead.autograd.misc.optimizers import adam
>>> loss = lambda x, i: np.sum((x - 3.0) ** 2)
>>> x = adam(grad(loss), np.zeros(2), num_iters=2000, step_size=0.05)
>>> np.round(x, 6)
array([3., 3.])
"""
from __future__ import annotations

import functools

from tapead import numpy as tnp
from tapead.autograd.misc.flatten import flatten

__all__ = ["adam", "rmsprop", "sgd", "unflatten_optimizer"]


def unflatten_optimizer(optimize):
    """An optimizer of flat vectors made to take and return nested containers."""
    @functools.wraps(optimize)
    def _optimize(grad, x0, callback=None, *args, **kwargs):
        _x0, unflatten = flatten(x0)

        def _grad(x, i):
            return flatten(grad(unflatten(x), i))[0]
        if callback:
            def _callback(x, i, g):
                return callback(unflatten(x), i, unflatten(g))
        else:
            _callback = None
        return unflatten(optimize(_grad, _x0, _callback, *args, **kwargs))
    return _optimize


@unflatten_optimizer
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Stochastic gradient descent with momentum ``mass``."""
    velocity = tnp.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@unflatten_optimizer
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=10**-8):
    """Root-mean-square propagation (the running mean of squares starts at one)."""
    avg_sq_grad = tnp.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g**2 * (1 - gamma)
        x = x - step_size * g / (tnp.sqrt(avg_sq_grad) + eps)
    return x


@unflatten_optimizer
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999,
         eps=10**-8):
    """Adam (Kingma & Ba): moment estimates with bias correction."""
    m = tnp.zeros(len(x))
    v = tnp.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g**2) + b2 * v
        mhat = m / (1 - b1 ** (i + 1))
        vhat = v / (1 - b2 ** (i + 1))
        x = x - step_size * mhat / (tnp.sqrt(vhat) + eps)
    return x
