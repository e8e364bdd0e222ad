#!/usr/bin/env python
"""Write docs/coverage.md: every public function of numpy, numpy.linalg,
numpy.fft, scipy.special, scipy.stats (the distributions jax.scipy.stats
offers) and scipy.linalg, with its status in tapead, read from tapead's
registry (``tapead.numpy._protocol.FUNCTIONS`` and ``UFUNCS``, ``tapead.scipy.*``).

    python tools/gen_coverage.py            write docs/coverage.md
    python tools/gen_coverage.py --check    exit 1 if docs/coverage.md is stale

A status is one of

* differentiable: tapead records it on traced values (a note says what is
  not differentiated, e.g. a constant order),
* value only: the result is integers or booleans (argmax, isnan): computed
  on the values, no derivative to carry,
* refused: a traced argument raises an error saying so (the note gives the
  reason, or the differentiable function to call instead).
"""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

OUT = ROOT / "docs" / "coverage.md"
DIFF, VALUE, REFUSED = "differentiable", "value only", "refused"

#: numpy functions whose results are integers or booleans by definition
VALUE_ONLY_NAMES = frozenset("""
    argmax argmin argsort argpartition argwhere nonzero flatnonzero count_nonzero
    searchsorted digitize bincount lexsort unravel_index ravel_multi_index shape ndim size
    isclose allclose array_equal array_equiv isin isneginf isposinf isreal iscomplex
    isrealobj iscomplexobj isscalar iscomplexobj matrix_rank result_type can_cast
    min_scalar_type may_share_memory shares_memory
""".split())

#: the distributions of jax.scipy.stats (its public modules) and JAX's other
#: jax.scipy.stats functions; each distribution with the methods JAX offers
JAX_STATS = {
    "bernoulli": "logpmf pmf cdf ppf", "beta": "logpdf pdf cdf logcdf sf logsf",
    "betabinom": "logpmf pmf", "binom": "logpmf pmf",
    "cauchy": "logpdf pdf cdf logcdf sf logsf isf ppf",
    "chi2": "logpdf pdf cdf logcdf sf logsf", "dirichlet": "logpdf pdf",
    "expon": "logpdf pdf cdf logcdf sf logsf ppf",
    "gamma": "logpdf pdf cdf logcdf sf logsf", "gennorm": "logpdf pdf cdf",
    "geom": "logpmf pmf", "gumbel_l": "logpdf pdf cdf logcdf sf logsf ppf",
    "gumbel_r": "logpdf pdf cdf logcdf sf logsf ppf",
    "laplace": "logpdf pdf cdf", "logistic": "logpdf pdf cdf sf isf ppf",
    "multinomial": "logpmf pmf", "multivariate_normal": "logpdf pdf",
    "nbinom": "logpmf pmf", "norm": "logpdf pdf cdf logcdf sf logsf ppf isf",
    "pareto": "logpdf pdf", "poisson": "logpmf pmf cdf entropy", "t": "logpdf pdf",
    "truncnorm": "logpdf pdf cdf logcdf sf logsf", "uniform": "logpdf pdf cdf ppf",
    "vonmises": "logpdf pdf", "wrapcauchy": "logpdf pdf",
}
JAX_STATS_FUNCTIONS = ("gaussian_kde", "mode", "rankdata", "sem")


def _zero_derivative(impl):
    from tapead import patterns
    prim = getattr(impl, "prim", None)
    return prim is not None and prim.sparsity is patterns.ZERO


def _public_callables(module, names):
    out = []
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if callable(obj) and not isinstance(obj, type):
            out.append((name, obj))
    return out


def numpy_rows(module, prefix):
    """(name, status, note) for the array functions of a numpy module."""
    from tapead.numpy._protocol import FUNCTIONS, UFUNCS, VALUE_UFUNCS
    rows = []
    for name, f in _public_callables(module, module.__all__):
        if isinstance(f, np.ufunc):
            outs = {t.split("->")[1] for t in f.types} - {"O"}     # not the object loops
            if f in VALUE_UFUNCS or (f in UFUNCS and outs == {"?"}):
                rows.append((name, VALUE, "boolean result"))
            elif f in UFUNCS:
                note = "derivative zero (piecewise constant)" if _zero_derivative(
                    UFUNCS[f]) else ""
                rows.append((name, DIFF, note))
            else:
                rows.append((name, REFUSED, "no derivative rule (NonDifferentiableError)"))
        elif f in FUNCTIONS:
            if name in VALUE_ONLY_NAMES:
                rows.append((name, VALUE, "integer or boolean result"))
            else:
                note = "derivative zero" if _zero_derivative(FUNCTIONS[f]) else ""
                rows.append((name, DIFF, note))
        elif hasattr(f, "_implementation"):         # dispatches to tapead (NEP 18)
            rows.append((name, REFUSED, "no derivative rule (NonDifferentiableError)"))
        # other callables (printing, I/O, constructors from Python data) do not
        # dispatch on their arguments' type: not listed
    return rows


def scipy_special_rows():
    import scipy.special as sps

    import tapead.scipy.special as tsp
    from tapead.numpy._protocol import UFUNCS
    rows = []
    for name, f in _public_callables(sps, sps.__all__):
        if isinstance(f, np.ufunc):
            if f in UFUNCS:
                note = tsp.NOTES.get(name, "")
                if not note and _zero_derivative(UFUNCS[f]):
                    note = "derivative zero (piecewise constant)"
                rows.append((name, DIFF, note))
            else:
                rows.append((name, REFUSED, "no derivative rule (NonDifferentiableError)"))
        elif name in tsp.__all__:
            rows.append((name, DIFF, f"call tapead.scipy.special.{name} (scipy's converts "
                                     "its arguments to arrays)"))
        else:
            rows.append((name, REFUSED, "scipy converts its arguments to arrays "
                                        "(TypeError)"))
    return rows


def scipy_linalg_rows():
    import scipy.linalg as sla

    import tapead.scipy.linalg as tsl
    from tapead._prims.conversion_hint import SCIPY_EQUIVALENTS
    hints = SCIPY_EQUIVALENTS["scipy.linalg"]
    rows = []
    for name, _ in _public_callables(sla, sla.__all__):
        if name in tsl.__all__:
            rows.append((name, DIFF, f"call tapead.scipy.linalg.{name}"))
        elif name in hints:
            rows.append((name, REFUSED, f"scipy converts its arguments to arrays; call "
                                        f"{hints[name]}"))
        else:
            rows.append((name, REFUSED, "scipy converts its arguments to arrays "
                                        "(TypeError)"))
    return rows


def scipy_stats_rows():
    import tapead.scipy.special as tsp
    import tapead.scipy.stats as tst
    refused_shape = {"gamma": "a", "chi2": "df", "beta": "a, b"}
    rows = []
    for dist in sorted(JAX_STATS):
        ours = tst.DISTRIBUTIONS.get(dist)
        for method in JAX_STATS[dist].split():
            label = f"{dist}.{method}"
            if ours is None or not hasattr(ours, method):
                rows.append((label, REFUSED, "not in tapead.scipy.stats yet (scipy's "
                                             "converts its arguments to arrays)"))
                continue
            note = f"call tapead.scipy.stats.{label}"
            if dist in refused_shape and method in ("cdf", "logcdf", "sf", "logsf"):
                note += f"; no derivative in {refused_shape[dist]} (refused when traced)"
            if dist == "poisson":
                note += "; no derivative in k"
            rows.append((label, DIFF, note))
    for name in JAX_STATS_FUNCTIONS:
        rows.append((name, REFUSED, "not in tapead.scipy.stats (scipy's converts its "
                                    "arguments to arrays)"))
    del tsp
    return rows


def sections():
    import scipy
    return [
        ("numpy", f"numpy {np.__version__}: ufuncs and the functions that dispatch on "
                  "array arguments (`numpy.__all__`)", numpy_rows(np, "np")),
        ("numpy.linalg", "`numpy.linalg.__all__`", numpy_rows(np.linalg, "np.linalg")),
        ("numpy.fft", "`numpy.fft.__all__`", numpy_rows(np.fft, "np.fft")),
        ("scipy.special", f"scipy {scipy.__version__}: `scipy.special.__all__`",
         scipy_special_rows()),
        ("scipy.stats", "the distributions and functions `jax.scipy.stats` offers, "
                        "with JAX's methods", scipy_stats_rows()),
        ("scipy.linalg", "`scipy.linalg.__all__`", scipy_linalg_rows()),
    ]


def render():
    secs = sections()
    lines = ["# Coverage of numpy and scipy", "",
             "What each public numpy and scipy function does on traced values. "
             "**differentiable**: tapead records it and differentiates it (every "
             "order); **value only**: the result is integers or booleans, computed on "
             "the values (no derivative to carry); **refused**: a traced argument "
             "raises an error that says why, and what to call instead when tapead "
             "has it. Generated by `tools/gen_coverage.py` from tapead's own tables "
             "(`tests/test_coverage_page.py` keeps it current).", "",
             "| module | differentiable | value only | refused | total |",
             "|---|---|---|---|---|"]
    for title, _, rows in secs:
        n = {s: sum(1 for r in rows if r[1] == s) for s in (DIFF, VALUE, REFUSED)}
        lines.append(f"| {title} | {n[DIFF]} | {n[VALUE]} | {n[REFUSED]} | {len(rows)} |")
    for title, what, rows in secs:
        lines += ["", f"## {title}", "", f"{what}.", "", "| name | status | note |",
                  "|---|---|---|"]
        for name, status, note in rows:
            lines.append(f"| `{name}` | {status} | {note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv):
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            sys.stderr.write(f"{OUT.relative_to(ROOT)} is stale: run python "
                             "tools/gen_coverage.py\n")
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
