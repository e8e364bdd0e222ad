"""``scipy.special``'s names, differentiable.

On plain inputs each function is scipy's own; on traced values it records
(reverse mode) or pushes tangents (forward mode).  scipy's ufuncs
(``scipy.special.erf(tracer)``) dispatch here by themselves; scipy's plain
functions (``logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``) do not:
call these.

>>> import numpy as np, tapead as ta
>>> from tapead.scipy.special import logsumexp
>>> g = ta.grad(lambda x: logsumexp(x))(np.array([0.0, np.log(3.0)]))
>>> np.round(g, 12).tolist()       # the softmax
[0.25, 0.75]
"""
from tapead._prims.special import (  # noqa: F401
    digamma, erf, erfc, expit, gamma, gammaln, log_softmax, logit, logsumexp, polygamma,
    psi, softmax, xlog1py, xlogy)
from tapead._prims.special_gamma import (  # noqa: F401
    beta, betainc, betaln, erfcinv, erfinv, gammainc, gammaincc, gammasgn, log_ndtr,
    multigammaln, ndtr, ndtri, rgamma, stdtr)
from tapead._prims.bessel import (  # noqa: F401
    i0, i0e, i1, i1e, iv, ive, j0, j1, jv, kv, y0, y1, yn, yv)
from tapead._prims.special_gamma import NOTES  # noqa: F401  (what is not differentiable)

__all__ = ["digamma", "erf", "erfc", "expit", "gamma", "gammaln", "log_softmax", "logit",
           "logsumexp", "polygamma", "psi", "softmax", "xlog1py", "xlogy",
           "beta", "betainc", "betaln", "erfcinv", "erfinv", "gammainc", "gammaincc",
           "gammasgn", "log_ndtr", "multigammaln", "ndtr", "ndtri", "rgamma", "stdtr",
           "i0", "i0e", "i1", "i1e", "iv", "ive", "j0", "j1", "jv", "kv", "y0", "y1", "yn",
           "yv"]
