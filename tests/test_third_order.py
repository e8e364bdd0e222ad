"""Third derivatives of every primitive in the op-spec table, by two routes.

``jacfwd(hessian(g))`` runs the batched forward rules (``jvp_many``) with
tangents that an outer ``jacfwd`` traces, a path the first- and second-order
checks never take; ``jacrev(jacrev(grad(g)))`` gets there by reverse mode
only.  Both must agree for every row of the table.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from opspecs import F64
from test_primitives import _all_cases, _setup, case_id


def _third_order_cases():
    seen, out = set(), []
    for case in _all_cases():
        spec, kind, shapes, dt = case
        if dt != F64 or spec.name in seen:
            continue
        first = _setup(case)[2][0]
        if np.ndim(first) == 0 or np.size(first) > 6:     # an array of a few elements
            continue
        seen.add(spec.name)
        out.append(pytest.param(case, id=case_id(case)))
    return out


@pytest.mark.parametrize("case", _third_order_cases())
def test_third_order_forward_over_hessian_equals_reverse(case):
    f, _, args = _setup(case)
    args = [np.asarray(a, float) for a in args]
    rest = args[1:]

    def g(x):
        y = f(x, *rest)
        return tnp.sum(y * y) if np.ndim(y) else y * y

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forward = np.asarray(ta.jacfwd(ta.hessian(g))(args[0]))
        reverse = np.asarray(ta.jacrev(ta.jacrev(ta.grad(g)))(args[0]))
    scale = max(1.0, float(np.max(np.abs(reverse))))
    np.testing.assert_allclose(forward, reverse, rtol=1e-11, atol=1e-11 * scale)
