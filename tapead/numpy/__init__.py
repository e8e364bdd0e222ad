"""numpy's names, differentiable: ``import tapead.numpy as tnp``.

On plain numpy inputs every function is numpy's own; on traced values it
records (reverse mode) or pushes tangents (forward mode).  numpy's own
functions and array methods dispatch here by themselves when called on
traced values (``__array_ufunc__``, ``__array_function__``), so plain
numpy code differentiates unchanged; ``tnp`` adds what numpy has no hook
for: ``tnp.at(x)[idx].set(v)`` (functional index updates),
``tnp.stop_gradient``, ``tnp.index_update`` and the activations ``relu``
and ``sigmoid``.  ``tapead.numpy.linalg`` mirrors ``numpy.linalg``.

>>> import numpy as np, tapead as ta, tapead.numpy as tnp
>>> def f(x):
...     return tnp.sum(tnp.sin(x) * x) + np.prod(x)      # np.* dispatches too
>>> print(np.round(ta.grad(f)(np.array([0.5, 2.0])), 6))
[2.918217 0.577004]
>>> print(tnp.at(np.zeros(3))[[0, 0]].add(1.0))
[2. 0. 0.]
"""
from numpy import (e, pi, inf, nan, float32, float64, ndarray, shape, ndim,  # noqa: F401
                   zeros, ones, zeros_like, ones_like, eye, arange, linspace, asarray,
                   array, empty)

from tapead._core import (  # noqa: F401  (scalar fast path in C)
    negative, positive, absolute, sign, sin, cos, tan, exp, log, log1p, expm1, sqrt,
    tanh, arctan, arcsin, arccos, sinh, cosh, square, reciprocal, exp2, log2, log10,
    arcsinh, arccosh, arctanh, cbrt, add, subtract, multiply, divide, power, maximum,
    minimum, arctan2, hypot)
from tapead._prims.elementwise import *  # noqa: F401,F403
from tapead._prims.reductions import *  # noqa: F401,F403
from tapead._prims.shape import *  # noqa: F401,F403
from tapead._prims.indexing import *  # noqa: F401,F403
from tapead._prims.linalg import *  # noqa: F401,F403
from tapead._prims.contract import *  # noqa: F401,F403
from tapead.numpy import linalg  # noqa: F401,E402
from tapead._prims.sorting import *  # noqa: F401,F403
from tapead._prims.misc import *  # noqa: F401,F403
from tapead._prims.stats import *  # noqa: F401,F403

abs = absolute  # noqa: A001
true_divide = divide
