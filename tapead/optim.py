"""Optimizer steps over pytrees of parameters (plain numpy arithmetic)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tapead import _core
from tapead._tree import tree_flatten, tree_map, tree_unflatten

__all__ = ["sgd", "sgd_inplace", "Adam"]


def sgd(params: Any, grads: Any, lr: float) -> Any:
    """``params - lr * grads``, leaf by leaf (a new pytree).

    Parameters
    ----------
    params, grads : pytree
        The same structure and shapes (``grads`` as ``ta.grad`` returns it).
    lr : float

    Returns
    -------
    pytree
        The updated parameters; ``params`` is not modified.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> p = ta.optim.sgd({"w": np.array([1.0, 2.0])}, {"w": np.array([10.0, -10.0])}, 0.1)
    >>> p["w"]
    array([0., 3.])
    """
    return tree_map(lambda p, g: p - lr * g, params, grads)


def sgd_inplace(params: Any, grads: Any, lr: float) -> None:
    """``p -= lr * g`` for every array leaf, in place (nothing is returned).

    The same numbers as ``sgd`` (the product rounded before the difference),
    without a temporary per leaf: float64 and float32 C-contiguous leaves
    take one C pass each, other arrays numpy's in-place ``-=``.  Every leaf
    is checked before any is changed.

    Parameters
    ----------
    params : pytree of ndarray
        Writeable numpy arrays (a dict of them is the quick case); updated in
        place.
    grads : pytree
        The structure and shapes of ``params`` (as ``ta.grad`` returns it).
    lr : float

    Raises
    ------
    TypeError
        A leaf of ``params`` is not a numpy array (a float cannot change in
        place: use ``sgd``, which returns new parameters).
    ValueError
        ``grads`` does not match ``params`` (keys, structure or shapes), or a
        parameter is read-only.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> p = {"w": np.array([1.0, 2.0])}
    >>> ta.optim.sgd_inplace(p, {"w": np.array([10.0, -10.0])}, 0.1)
    >>> p["w"]
    array([0., 3.])
    """
    if type(params) is dict and type(grads) is dict:
        if len(grads) == len(params):
            try:
                g_leaves = [grads[k] for k in params]
            except KeyError:
                g_leaves = None
            if g_leaves is not None and _core.sgd_step(list(params.values()), g_leaves, lr):
                return
    p_leaves, td = tree_flatten(params)
    g_leaves, gtd = tree_flatten(grads)
    if gtd != td:
        raise ValueError(f"sgd_inplace: the gradients' structure {gtd} is not the "
                         f"parameters' {td}; pass the gradient of the loss with respect "
                         "to these parameters")
    if not _core.sgd_step(p_leaves, g_leaves, lr):
        bad = next(type(p).__name__ for p in p_leaves if not isinstance(p, np.ndarray))
        raise TypeError(f"sgd_inplace: a parameter is a {bad}, not a numpy array, so it "
                        "cannot change in place; use ta.optim.sgd, which returns new "
                        "parameters, or keep the parameters as arrays")


class Adam:
    """Adam (Kingma & Ba 2015) over a pytree of numpy arrays.

    The moment estimates live in the object between calls of
    ``step(params, grads)``, which returns the new parameters (a new
    pytree); ``t`` counts the steps taken.

    Parameters
    ----------
    lr : float
        Step size.
    b1, b2 : float
        Decay rates of the first and second moment estimates.
    eps : float
        Added to the root of the second moment.

    Examples
    --------
    >>> import numpy as np
    >>> opt = Adam(lr=0.1)
    >>> p = {"w": np.array([1.0])}
    >>> p = opt.step(p, {"w": np.array([2.0])})
    >>> round(float(p["w"][0]), 6)      # the first step moves by lr
    0.9
    """

    def __init__(self, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.t = 0
        self.m = None
        self.v = None

    def step(self, params: Any, grads: Any) -> Any:
        p_leaves, td = tree_flatten(params)
        g_leaves, _ = tree_flatten(grads)
        if self.m is None:
            self.m = [np.zeros_like(np.asarray(p)) for p in p_leaves]
            self.v = [np.zeros_like(np.asarray(p)) for p in p_leaves]
        self.t += 1
        out = []
        for i, (p, g) in enumerate(zip(p_leaves, g_leaves)):
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * g
            self.v[i] = self.b2 * self.v[i] + (1 - self.b2) * g * g
            mhat = self.m[i] / (1 - self.b1 ** self.t)
            vhat = self.v[i] / (1 - self.b2 ** self.t)
            out.append(p - self.lr * mhat / (np.sqrt(vhat) + self.eps))
        return tree_unflatten(td, out)
