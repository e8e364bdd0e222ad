"""numpy's names, differentiable: ``import tapead.numpy as tnp``.

On plain numpy inputs every function is numpy's own; on traced values it
records (reverse mode) or pushes tangents (forward mode).
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
from tapead._prims.calculus import *  # noqa: F401,F403

abs = absolute  # noqa: A001
true_divide = divide
