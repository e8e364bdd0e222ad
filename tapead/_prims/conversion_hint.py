"""The message when numpy converts a tracer to an array (``np.asarray(x)``).

The conversion would drop the derivative, so tracers refuse it.  It happens
most often inside a scipy function, which converts its arguments before
computing: ``scipy.special.logsumexp(x)``, ``scipy.linalg.expm(x)``.  The
message then names the scipy function and, when tapead has one, the
differentiable function to call instead.  The scipy function is found on the
Python call stack: the outermost frame of the block of scipy frames that
leads to the conversion (a decorator's wrapper is looked through by the
function it wraps).

A numpy function called on a Python list of tracers (``np.mean([x, y])``)
converts the list itself: numpy dispatches on arrays (``__array_function__``),
not on what a list holds, so tapead never sees the call and the numpy code
ends by converting a tracer to a float.  The message then names the numpy
function, ``np.stack`` and, when there is one, the tapead.numpy function.
"""
from __future__ import annotations

import sys

import numpy as np

from tapead._core import Box

#: scipy subpackage -> {scipy function name: the tapead function to call instead}
SCIPY_EQUIVALENTS = {
    "scipy.special": {name: f"tapead.scipy.special.{name}" for name in
                      ("logsumexp", "softmax", "log_softmax", "polygamma",
                       "multigammaln")},
    "scipy.linalg": dict(
        {name: f"tapead.scipy.linalg.{name}" for name in
         ("solve_triangular", "cho_factor", "cho_solve", "expm", "cholesky", "sqrtm",
          "solve_sylvester", "solve_banded")},
        **{name: f"tapead.numpy.linalg.{name} (np.linalg.{name} dispatches to it)"
           for name in ("solve", "inv", "det", "eigh", "eigvalsh", "svd", "svdvals", "qr",
                        "lstsq", "pinv", "eig", "eigvals")}),
    "scipy.integrate": {"trapezoid": "np.trapezoid (which dispatches to tapead)"},
}

#: the distributions of tapead.scipy.stats and their methods (a test keeps this
#: equal to the module); keys of SCIPY_EQUIVALENTS["scipy.stats"] are "norm.logpdf"
STATS_METHODS = {
    "norm": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"),
    "t": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "gamma": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "chi2": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "beta": ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"),
    "poisson": ("logpmf", "pmf", "cdf"),
    "dirichlet": ("logpdf", "pdf"),
    "multivariate_normal": ("logpdf", "pdf", "entropy"),
}
SCIPY_EQUIVALENTS["scipy.stats"] = {f"{d}.{m}": f"tapead.scipy.stats.{d}.{m}"
                                    for d, methods in STATS_METHODS.items() for m in methods}

_STACK_LIMIT = 64


def _public_module(name: str) -> str:
    """'scipy.linalg._basic' -> 'scipy.linalg'."""
    parts = name.split(".")
    keep = [p for p in parts if not p.startswith("_")]
    return ".".join(keep[:2])


def _module_of(frame) -> str:
    return frame.f_globals.get("__name__", "") or ""


def _distribution(frame):
    """'norm' for a method of scipy.stats.norm (its ``self``), else None."""
    obj = frame.f_locals.get("self")
    if obj is None:
        return None
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        name = type(obj).__name__.removesuffix("_gen").removesuffix("_frozen")
    return name


def _named_functions(frame):
    """(public module, name) of the function a frame runs (a distribution's
    method as 'norm.logpdf'), then of any scipy function it holds (a
    decorator's wrapper holds the one it wraps)."""
    module = _public_module(_module_of(frame))
    if module == "scipy.stats":
        dist = _distribution(frame)
        if dist is not None:
            yield module, f"{dist}.{frame.f_code.co_name}"
    yield module, frame.f_code.co_name
    for v in list(frame.f_locals.values()):
        mod = getattr(v, "__module__", None)
        if callable(v) and isinstance(mod, str) and mod.startswith("scipy"):
            yield _public_module(mod), getattr(v, "__name__", "")


def _scipy_block():
    """The frames of scipy code that led to the conversion, innermost first."""
    frame = sys._getframe(2)
    depth = 0
    while frame is not None and depth < _STACK_LIMIT and \
            _module_of(frame).split(".")[0] in ("tapead", "numpy"):
        frame, depth = frame.f_back, depth + 1
    block = []
    while frame is not None and depth < _STACK_LIMIT and _module_of(frame).startswith("scipy"):
        block.append(frame)
        frame, depth = frame.f_back, depth + 1
    return block


#: numpy functions that convert their arguments before any dispatch: what to call
NUMPY_HINTS = {
    ("numpy.lib._index_tricks_impl", "__getitem__"):
        "np.r_ / np.c_ convert their entries to numpy arrays before tapead can see "
        "them (index tricks have no dispatch hook); use tapead.numpy.r_ / "
        "tapead.numpy.c_, or np.concatenate / np.stack",
}


#: numpy functions whose tapead.numpy namesake takes a list of tracers (a test
#: checks that each does, with the values and gradients of the stacked array)
LIST_EQUIVALENTS = ("mean", "var", "std")


def _holds_tracer(items) -> bool:
    """Whether a (nested) list, tuple or object array holds a tracer; an
    explicit stack."""
    stack = [items]
    while stack:
        top = stack.pop()
        for v in (top.flat if isinstance(top, np.ndarray) else top):
            if isinstance(v, Box):
                return True
            if isinstance(v, (list, tuple)) or _is_object_array(v):
                stack.append(v)
    return False


def _is_object_array(v) -> bool:
    return isinstance(v, np.ndarray) and v.dtype == object


def _list_hint(frame):
    """The hint when ``frame`` (the outermost numpy frame) runs a numpy function
    whose first argument is a Python list or tuple holding tracers, or None."""
    code = frame.f_code
    if code.co_argcount == 0:
        return None
    first = frame.f_locals.get(code.co_varnames[0])   # numpy may have converted it
    if not (isinstance(first, (list, tuple)) or _is_object_array(first)) or \
            not _holds_tracer(first):
        return None
    module = _module_of(frame)
    name = ("np.linalg." if module.startswith("numpy.linalg") else "np.") + code.co_name
    tapead_fn = (f", or call tapead.numpy.{code.co_name} (it takes the list)"
                 if module.split(".")[1] != "linalg" and code.co_name in LIST_EQUIVALENTS
                 else "")
    return (f"{name} of a Python list (or object array) of traced values converts it "
            "to a numpy array before tapead sees the call (numpy dispatches on arrays "
            "and tracers, not on what a list holds); pass np.stack(values) (a traced "
            f"array) instead{tapead_fn}")


def _numpy_hint():
    """The hint for a conversion inside a numpy function that lists tracers as
    plain Python objects (np.r_, np.mean of a list), or None."""
    frame = sys._getframe(2)
    depth = 0
    outer = None
    while frame is not None and depth < _STACK_LIMIT and \
            _module_of(frame).split(".")[0] in ("tapead", "numpy"):
        hint = NUMPY_HINTS.get((_module_of(frame), frame.f_code.co_name))
        if hint is not None:
            return hint
        if _module_of(frame).startswith("numpy"):
            outer = frame
        frame, depth = frame.f_back, depth + 1
    return None if outer is None else _list_hint(outer)


def array_message(generic: str) -> str:
    """The TypeError message of ``np.asarray(tracer)``."""
    hint = _numpy_hint()
    if hint is not None:
        return f"{hint}. ({generic})"
    block = _scipy_block()
    if not block:
        return generic
    for frame in reversed(block):                    # outermost first
        for module, name in _named_functions(frame):
            target = SCIPY_EQUIVALENTS.get(module, {}).get(name)
            if target is not None:
                return (f"{module}.{name} cannot see through tapead tracers (it converts "
                        "its arguments to numpy arrays, which would drop the "
                        f"derivative); call {target} instead, which is differentiable.")
    public = [f for f in block if "._lib" not in _module_of(f)]   # not scipy's helpers
    outer = (public or block)[-1]
    module = _public_module(_module_of(outer))
    dist = _distribution(outer) if module == "scipy.stats" else None
    what = f"{module}.{dist + '.' if dist else ''}{outer.f_code.co_name}"
    return (f"{what} cannot see through tapead tracers (it converts its arguments to "
            "numpy arrays, which would drop the derivative). tapead's differentiable "
            "scipy functions are in tapead.scipy.special, tapead.scipy.linalg and "
            "tapead.scipy.stats, numpy's "
            "names in tapead.numpy; or give the function a rule with ta.custom_vjp / "
            "ta.custom_jvp.")
