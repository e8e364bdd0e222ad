"""``autograd.scipy.stats``: the distributions autograd differentiates, with
tapead's derivatives (``tapead.scipy.stats``): ``norm``, ``t``, ``gamma``,
``beta``, ``chi2``, ``poisson``, ``dirichlet``, ``multivariate_normal``.

>>> import numpy as np
>>> from tapead.autograd import grad
>>> from tapead.autograd.scipy.stats import norm
>>> float(grad(norm.logpdf)(0.5, 0.0, 2.0))    # -(x - loc) / scale**2
-0.125
"""
from tapead.autograd.scipy.stats import (beta, chi2, dirichlet, gamma,  # noqa: F401
                                         multivariate_normal, norm, poisson, t)

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
